"""Fleet: nodes × GPUs with short histories; pick GPUs (space, enter, click on the mark) and whole nodes.

Under the table, the highlighted row's details and, for a GPU, its utilization and memory over time as a chart
(h shows or hides it). At 80 columns the chart takes the details' place (a chart narrower than the screen
has too few columns to read, and the details' process lines need the width); from WIDE columns they sit
side by side. The panel's height does not change with the cursor, so the table never jumps.

The app owns the fleet data (it runs the feed worker) and the selection; this screen shows them and posts the
user's toggles to the app, which passes the selection on to Compose."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Static

from cockpit.tui.models import fleet as fleetview
from cockpit.tui.models import gpu_history as gpuhistory
from cockpit.tui.screens.base import CockpitScreen
from cockpit.tui.widgets.gpu_chart import GpuChart
from cockpit.tui.widgets.gpu_table import GpuTable
from cockpit.tui.widgets.navbar import NavBar

if TYPE_CHECKING:
    from cockpit.fleet.records import NodeReport

WIDE = 120  # columns from which the details and the chart sit side by side


class FleetScreen(CockpitScreen):
    TITLE = "Fleet"
    BINDINGS = [
        Binding("c", "compose_selection", "Compose"),
        Binding("x", "clear_selection", "Clear"),
        Binding("g", "refresh", "Refresh"),
        Binding("h", "toggle_history", "History"),
    ]

    def compose(self) -> ComposeResult:
        yield NavBar("fleet", id="nav")
        with Vertical(id="fleet"):
            yield GpuTable(id="gpus")
            with Horizontal(id="fleet-bottom"):
                yield Static("", id="fleet-detail", markup=False)
                yield GpuChart(id="fleet-chart")
        yield Footer()

    def on_mount(self) -> None:
        self.add_class("-chart")
        self.set_class(self.app.size.width >= WIDE, "-wide")
        self.capp.fleet_changed.subscribe(self, self.refresh_fleet)
        self.app.theme_changed_signal.subscribe(self, lambda _: self.query_one(GpuTable).restyle())
        self.refresh_fleet(None)
        self.query_one(GpuTable).focus()

    def refresh_fleet(self, _: object) -> None:
        app = self.capp
        nodes = app.nodes
        table = self.query_one(GpuTable)
        spark = gpuhistory.spark_width(self.app.size.width)
        table.show(fleetview.rows(nodes, app.history, app.selection, spark), spark)
        gpus = sum(len(n.gpus) for n in nodes)
        bad = sum(fleetview.node_summary(n)[0] == "node-error" for n in nodes)
        picked = len(app.selection.gpus) + len(app.selection.nodes)
        if nodes:
            text = (f"{len(nodes)} node{'s' if len(nodes) != 1 else ''} · {gpus} GPU{'s' if gpus != 1 else ''}"
                    + (f" · {bad} down" if bad else "") + f" · {picked} picked")
            self.query_one(NavBar).info = text
        self._show_detail()

    def on_resize(self, event: events.Resize) -> None:
        """The sparklines' width and the panel's layout follow the terminal."""
        self.set_class(event.size.width >= WIDE, "-wide")
        self.refresh_fleet(None)

    def action_toggle_history(self) -> None:
        self.toggle_class("-chart")
        self._show_detail()

    def _show_detail(self) -> None:
        key = self.query_one(GpuTable).current_key()
        detail = self.query_one("#fleet-detail", Static)
        node = self._node_of(key)
        parts = key.split("\x1f") if key else []
        gpu = int(parts[2]) if node is not None and parts[0] == "gpu" else None
        reading = next((g for g in node.gpus if g.index == gpu), None) if node is not None else None
        self.set_class(reading is not None, "-gpu")  # a GPU that is gone has its details ("gone"), no chart
        if node is None:
            detail.update("", layout=False)  # fixed height: no re-layout of the screen
            return
        lines = fleetview.details(node, gpu)
        if reading is None and not node.gpus and self.has_class("-chart"):
            lines = [*lines, "", "no GPU on this node: no utilisation or memory history (h hides this panel)"]
        detail.update("\n".join(lines), layout=False)
        if reading is not None and self.has_class("-chart"):
            history = self.capp.history
            self.query_one(GpuChart).show((key, history.count(node.host, reading.index)),
                                          lambda: gpuhistory.gpu_chart(node.host, reading, history))

    def _node_of(self, key: str | None) -> NodeReport | None:
        if key is None:
            return None
        host = key.split("\x1f")[1]
        return next((n for n in self.capp.nodes if n.host == host), None)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def on_gpu_table_toggle(self, event: GpuTable.Toggle) -> None:
        node = self._node_of(event.key)
        if node is None:
            return
        parts = event.key.split("\x1f")
        sel = self.capp.selection
        sel = sel.toggle_gpu(node.host, int(parts[2])) if parts[0] == "gpu" else sel.toggle_node(node)
        self.capp.set_selection(sel)

    def action_clear_selection(self) -> None:
        self.capp.set_selection(fleetview.Selection())

    def action_compose_selection(self) -> None:
        self.app.switch_mode("compose")

    def action_refresh(self) -> None:
        self.capp.ctx.fleet.poke()
        self.notify("asked every node for a report", timeout=2)
