"""Fleet screen with recorded fleet data: the table, the detail panel, selecting GPUs and nodes (keys and mouse),
and the selection arriving in Compose."""

from __future__ import annotations

from tui.tuidata import fleet_shown, until

from cockpit.tui.app import CockpitApp
from cockpit.tui.screens.compose import ComposeScreen
from cockpit.tui.screens.fleet import FleetScreen
from cockpit.tui.widgets.gpu_table import GpuTable


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
