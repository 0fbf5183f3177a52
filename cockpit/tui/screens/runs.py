"""Runs: every run directory with its state, launcher, nodes, ranks and age; enter opens the run view.

The list is read in a worker every few seconds (cockpit.run.store.list_runs, with cockpit.launch.control fixing
the state of runs whose supervisor died, whatever their launcher, as `cockpit ps` does). Where Slurm is
installed (Context.user_jobs), a second table below lists every Slurm job of the user, cockpit's or not, as
`cockpit ps --all` does (arrays one row), read in its own worker; enter on a job a run submitted opens the run,
on any other job says how to read its output. Without Slurm the table stays hidden."""

from __future__ import annotations

from pathlib import Path

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer

from cockpit.insight.diagnosis import health
from cockpit.run.store import RunStatus
from cockpit.tui.messages import JobsListed, RunsListed
from cockpit.tui.models import runs_table
from cockpit.tui.models.paths import NAV_WIDTH, fit_path
from cockpit.tui.screens.base import CockpitScreen
from cockpit.tui.widgets.navbar import NavBar

COLUMNS = runs_table.COLUMNS
JOB_COLUMNS = ("JOBID", "NAME", "STATE", "NODES", "TIME/LIMIT", "ARRAY/RUN")


class RunsTable(DataTable):
    """A table whose rows open (a run, a Slurm job): DataTable's own enter is hidden from the footer, and as the
    focused widget's binding it hid the screen's `enter Open` too, so nothing on screen said how to open a run."""

    BINDINGS = [Binding("enter", "select_cursor", "Open", show=True)]


class RunsScreen(CockpitScreen):
    TITLE = "Runs"
    BINDINGS = [Binding("enter", "open_run", "Open", show=True), Binding("g", "reload", "Refresh")]

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[tuple[Path, RunStatus]] = []
        self.jobs: list[tuple[str, str | None, str]] = []  # (job id, owning run's directory, output hint)
        self._listed: RunsListed | None = None  # the last list, shown again to fit a new width
        self._stale = False  # a refresh came due while another screen covered this one: done when it shows

    def compose(self) -> ComposeResult:
        yield NavBar("runs", id="nav")
        with Vertical(id="runs"):
            yield RunsTable(id="runs-table", cursor_type="row")
            yield RunsTable(id="jobs-table", cursor_type="row", classes="hidden")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#runs-table", DataTable)
        for label in COLUMNS:
            table.add_column(label, key=label)
        jobs = self.query_one("#jobs-table", DataTable)
        for label in JOB_COLUMNS:
            jobs.add_column(label, key=label)
        self.reload()
        self.set_interval(self.capp.ctx.runs_every, self._refresh_shown)

    def _refresh_shown(self) -> None:
        """The periodic refresh, while this screen is seen. Under a run's view it read every run's status.json
        every runs_every seconds for a list nobody saw: at 4,096 ranks ~40 ms of a worker thread holding the
        interpreter (a key press on the run view waited for it) and 4,096 records for the collector (issue 32)."""
        if self._covered():
            self._stale = True
        else:
            self.reload()

    def on_screen_resume(self) -> None:
        if self._stale:
            self._stale = False
            self.reload()

    def action_reload(self) -> None:
        self.reload()

    @work(thread=True, exclusive=True, group="user-jobs", exit_on_error=False)
    def reload_jobs(self) -> None:
        from cockpit.slurm.command import SlurmError

        user_jobs = self.capp.ctx.user_jobs
        if user_jobs is None:  # started only where the context has them
            return
        try:
            self.post_message(JobsListed(user_jobs()))
        except SlurmError as exc:
            self.post_message(JobsListed([], str(exc)))

    def on_jobs_listed(self, message: JobsListed) -> None:
        from cockpit.slurm.arrays import group, owner, run_jobs, tasks_summary

        table = self.query_one("#jobs-table", DataTable)
        table.set_class(not message.jobs, "hidden")
        owned = run_jobs(self.runs)
        dirs = {s.run_id: str(d) for d, s in self.runs}
        table.clear()
        self.jobs = []
        for job, tasks in group(message.jobs):
            jid = f"{job.array_job_id}_*" if tasks else job.job_id
            run = owner(job, owned)
            state = job.slurm_state + (f" ({job.reason})" if job.reason and job.reason != "None" else "")
            table.add_row(jid, job.name[:16], state[:28], (job.nodes or "-")[:16],
                          f"{job.elapsed or '-'}/{job.time_limit or '?'}",
                          f"run {run}" if run else (tasks_summary(tasks) if tasks else ""), key=jid)
            self.jobs.append((job.array_job_id or job.job_id, dirs.get(run) if run else None, jid))

    @work(thread=True, exclusive=True, group="runs", exit_on_error=False)
    def reload(self) -> None:
        from cockpit.launch.control import frozen_supervisor, reconcile_runs
        from cockpit.run.store import list_runs

        warnings: list[str] = []
        runs = reconcile_runs(list_runs(self.capp.ctx.runs_dir), warnings.append)
        frozen = {d: f for d, s in runs if not s.final and (f := frozen_supervisor(s)) is not None}
        self.post_message(RunsListed(runs, frozen))
        if self.capp.ctx.user_jobs is not None:
            self.app.call_from_thread(self.reload_jobs)
        for text in warnings:
            self.app.call_from_thread(self.notify, text, severity="warning", timeout=8)

    def on_runs_listed(self, message: RunsListed) -> None:
        self.runs = list(reversed(message.runs))  # newest first
        table = self.query_one("#runs-table", DataTable)
        current = self._current()
        now = self.capp.ctx.clock()
        self._listed = message
        rows = [(s.run_id, s.state, health(s, message.frozen.get(run_dir)), runs_table.age(now - s.created),
                 "?" if s.world_size is None else str(s.world_size), s.launcher, ",".join(s.hosts) or "-")
                for run_dir, s in self.runs]
        width = table.scrollable_content_region.width or self.app.size.width
        fitted = runs_table.fit(rows, width)
        if tuple(str(c.label) for c in table.columns.values()) != fitted.columns:  # NODES left out, or back
            table.clear(columns=True)
            for label in fitted.columns:
                table.add_column(label, key=label)
        else:
            table.clear()
        for (run_dir, _), cells in zip(self.runs, fitted.rows, strict=True):
            table.add_row(*cells, key=str(run_dir))
        keys = [str(d) for d, _ in self.runs]
        if current in keys:
            table.move_cursor(row=keys.index(current), animate=False)
        active = sum(not s.final for _, s in self.runs)
        said = f"{len(self.runs)} run{'s' if len(self.runs) != 1 else ''} · {active} active · in "
        # at 80 columns the path was cut off ("in /tmp/tmp.x/.lo"): ~ for home, then ~/…/cockpit/runs
        where = fit_path(str(self.capp.ctx.runs_dir), self.size.width - NAV_WIDTH - len(said))
        self.query_one(NavBar).info = (
            f"{len(self.runs)} run{'s' if len(self.runs) != 1 else ''} · {active} active · in {where}"
            if self.runs else f"no runs in {where} yet: compose a job and launch it (F3)")

    def on_resize(self, _: events.Resize) -> None:
        if self._listed is not None:  # NODES takes the room the other columns leave
            self.call_after_refresh(self.on_runs_listed, self._listed)

    def _current(self) -> str | None:
        table = self.query_one("#runs-table", DataTable)
        if not self.runs or not 0 <= table.cursor_row < len(self.runs):
            return None
        return str(self.runs[table.cursor_row][0])

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.data_table.id == "jobs-table":
            self._open_job(event.cursor_row)
            return
        self.capp.open_run(Path(str(event.row_key.value)))

    def _open_job(self, row: int) -> None:
        """A job a run submitted opens that run; any other job: how to read its output (the CLI follows it)."""
        if not 0 <= row < len(self.jobs):
            return
        job_id, run_dir, shown = self.jobs[row]
        if run_dir is not None:
            self.capp.open_run(Path(run_dir))
        else:
            self.notify(f"job {shown}: `cockpit logs -f {job_id}` follows its output, `cockpit diagnose {job_id}` "
                        "reads it", timeout=8)

    def action_open_run(self) -> None:
        current = self._current()
        if current is not None:
            self.capp.open_run(Path(current))
