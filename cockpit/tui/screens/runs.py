"""Runs: every run directory with its state, launcher, nodes, ranks and age; enter opens the run view.

The list is read in a worker every few seconds (cockpit.runs.list_runs, with cockpit.launch.control fixing
the state of runs whose supervisor died, whatever their launcher, as `cockpit ps` does)."""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer

from cockpit.rundiag import duration, health
from cockpit.runs import RunStatus
from cockpit.tui.messages import RunsListed
from cockpit.tui.screens.base import CockpitScreen
from cockpit.tui.widgets.navbar import NavBar

COLUMNS = ("RUN", "STATE", "LAUNCHER", "NODES", "RANKS", "AGE", "HEALTH")


class RunsScreen(CockpitScreen):
    TITLE = "Runs"
    BINDINGS = [Binding("enter", "open_run", "Open", show=True), Binding("g", "reload", "Refresh")]

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[tuple[Path, RunStatus]] = []

    def compose(self) -> ComposeResult:
        yield NavBar("runs", id="nav")
        with Vertical(id="runs"):
            yield DataTable(id="runs-table", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for label in COLUMNS:
            table.add_column(label, key=label)
        self.reload()
        self.set_interval(self.app.ctx.runs_every, self.reload)

    def action_reload(self) -> None:
        self.reload()

    @work(thread=True, exclusive=True, group="runs", exit_on_error=False)
    def reload(self) -> None:
        from cockpit.launch.control import reconcile_runs
        from cockpit.runs import list_runs

        warnings: list[str] = []
        runs = reconcile_runs(list_runs(self.app.ctx.runs_dir), warnings.append)
        self.post_message(RunsListed(runs))
        for text in warnings:
            self.app.call_from_thread(self.notify, text, severity="warning", timeout=8)

    def on_runs_listed(self, message: RunsListed) -> None:
        self.runs = list(reversed(message.runs))  # newest first
        table = self.query_one(DataTable)
        current = self._current()
        now = self.app.ctx.clock()
        table.clear()
        for run_dir, s in self.runs:
            nodes = ",".join(s.hosts) or "-"
            table.add_row(s.run_id, s.state, s.launcher, nodes[:24],
                          "?" if s.world_size is None else str(s.world_size),
                          duration(max(0.0, now - s.created)), health(s), key=str(run_dir))
        keys = [str(d) for d, _ in self.runs]
        if current in keys:
            table.move_cursor(row=keys.index(current), animate=False)
        active = sum(not s.final for _, s in self.runs)
        where = self.app.ctx.runs_dir
        self.query_one(NavBar).info = (
            f"{len(self.runs)} run{'s' if len(self.runs) != 1 else ''} · {active} active · in {where}"
            if self.runs else f"no runs in {where} yet: compose a job and launch it (F3)")

    def _current(self) -> str | None:
        table = self.query_one(DataTable)
        if not self.runs or not 0 <= table.cursor_row < len(self.runs):
            return None
        return str(self.runs[table.cursor_row][0])

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.app.open_run(Path(str(event.row_key.value)))

    def action_open_run(self) -> None:
        current = self._current()
        if current is not None:
            self.app.open_run(Path(current))
