"""Fleet screen with recorded fleet data: the table, the detail panel, the highlighted GPU's history chart,
selecting GPUs and nodes (keys and mouse), and the selection arriving in Compose."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tui.tuidata import NOW, READINGS, fleet_shown, fleet_snapshot, until

import cockpit.tui.app
from cockpit.tui.app import CockpitApp
from cockpit.tui.messages import FleetUpdated
from cockpit.tui.screens.compose import ComposeScreen
from cockpit.tui.screens.fleet import FleetScreen
from cockpit.tui.widgets.gpu_chart import GpuChart
from cockpit.tui.widgets.gpu_table import GpuTable

H100 = "gpu\x1fgpu-h100\x1f0"


def row_texts(table: GpuTable) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def detail(app) -> str:
    return str(app.screen.query_one("#fleet-detail").content)


async def test_fleet_table_and_selection_feeding_compose(ctx):
    app = CockpitApp(ctx)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: fleet_shown(app), what="the fleet snapshots")
        assert isinstance(app.screen, FleetScreen)
        table = app.screen.query_one(GpuTable)
        rows = row_texts(table)
        assert rows[0][1:3] == ["localhost", "CPU · 2 cores"]
        assert [r[1].strip() for r in rows[1:3]] == ["gpu-h100", "0"] and rows[2][2] == "H100 80GB HBM3"
        assert rows[2][3].startswith(" 90% ") and rows[2][5:] == ["59C", "3"]
        assert rows[-1][1:3] == ["gpu-down", "unreachable"]
        assert "no NVIDIA driver" in detail(app) and "2 CPU cores" in detail(app)
        await pilot.press("down", "down")
        assert "3 processes" in detail(app) and "gpu_burn" in detail(app)
        await pilot.press(*["down"] * 6)
        assert "connection refused" in detail(app) and "hint: is sshd running" in detail(app)

        # selecting GPUs (keys and mouse) feeds Compose
        await pilot.press(*["up"] * 5, "space")  # gpu-a5000 as a whole: both GPUs
        assert app.selection.ids("gpu-a5000") == [0, 1] and str(table.get_row_at(3)[0]) == "●"
        await pilot.press("down", "space")  # a5000 GPU 0 off again
        assert app.selection.ids("gpu-a5000") == [1] and str(table.get_row_at(3)[0]) == "◐"
        await pilot.click(GpuTable, offset=(2, 5))  # the mark of a5000 GPU 0 (row 4 + header): on again
        await until(pilot, lambda: app.selection.ids("gpu-a5000") == [0, 1], what="the click")
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ComposeScreen), what="compose")
        compose = app.screen
        await until(pilot, lambda: compose.checked is not None and compose.form.gpus == "[0,1]", what="the form")
        assert (compose.form.launcher, compose.form.nodes) == ("ssh", "gpu-a5000")
        await until(pilot, lambda: "--nproc-per-node=2" in compose.query_one("#preview").text, what="preview")
        assert compose.query_one("#f-nodes").value == "gpu-a5000"
        await pilot.press("f2", "x", *["up"] * 5, "space")  # only this machine (a CPU node): local, no GPUs
        assert app.selection.nodes == {"localhost"} and not app.selection.gpus
        await pilot.press("f3")
        await until(pilot, lambda: compose.form.launcher == "local" and compose.form.gpus == "none",
                    what="the local CPU job")
        assert compose.query_one("#f-nodes").disabled


class QueuedFleet:
    """A feed that publishes what the test puts in its queue, when the test puts it there."""

    local_names = ("localhost",)

    def __init__(self) -> None:
        self.queue: asyncio.Queue = asyncio.Queue()

    async def run(self, publish) -> None:
        while True:
            publish(await self.queue.get())

    def poke(self) -> None:
        return None


class CountingApp(CockpitApp):
    """Counts the fleet updates the app handles (they coalesce while the UI is busy)."""

    CSS_PATH = Path(cockpit.tui.app.__file__).with_name("app.tcss")  # relative paths resolve from this file
    updates = 0

    def on_fleet_updated(self, message: FleetUpdated) -> None:
        self.updates += 1
        super().on_fleet_updated(message)


def chart_text(app) -> str:
    return app.screen.query_one(GpuChart).render().plain


async def test_history_chart_of_the_highlighted_gpu(ctx):
    app = CockpitApp(ctx)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: fleet_shown(app), what="the fleet snapshots")
        screen = app.screen
        chart, text = screen.query_one(GpuChart), screen.query_one("#fleet-detail")
        assert text.display and not chart.display and chart.draws == 0  # a node's row: its details, no chart
        assert "no GPU on this node: no utilisation or memory history" in detail(app)  # localhost: CPU only
        await pilot.press("down", "down")
        assert chart.display and not text.display  # 80 columns: the chart takes the details' place
        assert chart.drawn == (H100, READINGS) and chart.draws == 1
        shown = chart_text(app)
        assert "gpu-h100 GPU 0 · H100 80GB HBM3 · util 90% · memory 24%" in shown
        assert "util %" in shown and "memory %" in shown and "seconds ago" in shown and "-60" in shown
        await pilot.press("space", "x")  # selection changes refresh the fleet, not the chart
        assert chart.draws == 1
        await pilot.press("down", "down", "up", "up")
        assert chart.draws == 3 and chart.drawn == (H100, READINGS)
        await pilot.press("h")
        assert text.display and not chart.display and "3 processes" in detail(app)
        await pilot.press("h")
        table = screen.query_one(GpuTable)
        assert table.region.height == 10  # a header and 9 rows beside the 12-row chart panel
        await pilot.resize_terminal(160, 48)
        await until(pilot, lambda: table.columns[table.ordered_columns[3].key].width == 5 + 46,
                    what="the wider sparklines")
        assert text.display and chart.display  # side by side
        assert len(str(table.get_row_at(2)[3])) == 5 + 46 and table.cursor_row == 2


async def test_chart_says_no_history_before_two_readings_and_redraws_once_per_update(ctx):
    feed = ctx.fleet = QueuedFleet()
    app = CountingApp(ctx)
    async with app.run_test(size=(80, 24)) as pilot:
        feed.queue.put_nowait(fleet_snapshot(updated=NOW))
        await until(pilot, lambda: app.updates == 1, what="the first reading")
        await pilot.press("down", "down")
        chart = app.screen.query_one(GpuChart)
        assert "no history yet" in chart_text(app) and chart.draws == 1
        for k in range(1, 6):  # a burst: the updates may coalesce, each handled one draws once
            feed.queue.put_nowait(fleet_snapshot(k * 10, updated=NOW + 2 * k))
        await until(pilot, lambda: chart.drawn == (H100, 6), what="the burst")
        assert 1 + 1 <= chart.draws <= 1 + app.updates - 1
        assert "no history yet" not in chart_text(app) and "-10" in chart_text(app) and "-5" in chart_text(app)
        handled = app.updates
        feed.queue.put_nowait(fleet_snapshot(50, updated=NOW + 10))  # the same report again: no new reading
        await until(pilot, lambda: app.updates > handled, what="the repeat")
        assert chart.drawn == (H100, 6) and len(app.history.times("gpu-h100", 0)) == 6
