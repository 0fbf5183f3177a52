"""The run view: one run's logs (merged with [host:rank] prefixes, or one rank / torchrun agent), follow,
search and a level filter; per-rank status; loss and samples/s; the diagnosis with links to its evidence;
stop (and requeue for Slurm runs where the launcher offers it).

Data flow: the RunFeed follows the run in a process of its own (cockpit.tui.models.feed_process) and a thread worker
reads its batches; the feed wakes the screen with one coalescing FeedReady message, and the handler drains the batch
waiting (which asks the feed for the next). A view or filter change is a request to the feed, answered with the view's
lines a moment later. Metrics and the diagnosis are read in their own workers.

Here: the feed's batches applied, the rank table and title kept current, view switches, the log's keys.
Elsewhere: the findings panel, the diagnosis and the jump to evidence (run_findings), stop and requeue
(run_control), the widgets (widgets/rank_table, findings_list, rank_log, metrics_plot), and the decisions
and words as pure functions (cockpit.tui.models.run_view)."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Input, Static

from cockpit.plot.series import BEATS
from cockpit.plot.source import RunSeries
from cockpit.run.progress import RankProgress
from cockpit.run.store import RunStatus
from cockpit.tui.messages import FeedReady, ForecastRead, MetricsRead
from cockpit.tui.models import attempt_line
from cockpit.tui.models import run_view as runview
from cockpit.tui.models.log_filter import LineFilter
from cockpit.tui.models.log_store import MERGED
from cockpit.tui.models.rank_groups import FLAT_UP_TO, RankInfo
from cockpit.tui.models.rank_table import (
    SIDE_WIDTH,
    rank_rate,
    rank_state,
    rank_step,
    short_age,
    shown_progress,
    side_rate,
)
from cockpit.tui.models.run_feed import Drained, LiveEvent, RunFeed, SourceStats
from cockpit.tui.models.run_view import APPLY_EVERY, REBUILD_EVERY
from cockpit.tui.screens.base import CockpitScreen
from cockpit.tui.screens.run_control import RunControls
from cockpit.tui.screens.run_findings import RunFindings
from cockpit.tui.screens.run_ranks import RunRanks
from cockpit.tui.widgets.findings_list import FindingsList
from cockpit.tui.widgets.metrics_plot import SIDE_POINTS, SPARK_CELLS, MetricsPlot
from cockpit.tui.widgets.navbar import NavBar
from cockpit.tui.widgets.rank_groups import RankGroupTable
from cockpit.tui.widgets.rank_log import RankLog
from cockpit.tui.widgets.rank_table import RankTable

if TYPE_CHECKING:
    from cockpit.spec.model import JobSpec


class RunViewScreen(RunRanks, RunFindings, RunControls, CockpitScreen):
    TITLE = "Run"
    # The footer shows them in this order, the most needed first, so that at 80 columns the keys a failing or
    # hanging run calls for (stop it, fix it, why, help) are the ones shown; the rest show from 120 columns, and
    # F1 lists them all. Help is bound here (as the app binds it) to stand before the view's own keys.
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("s", "stop", "Stop"),
        Binding("F", "fix", "Fix", tooltip="Fix + relaunch: the diagnosis's fixes as a diff of the job file"),
        Binding("d", "diagnose", "Diagnose"),
        Binding("c", "charts", "Charts"),
        Binding("k", "stacks", "Stacks"),
        Binding("f1,question_mark", "app.help", "Help"),
        Binding("f", "toggle_follow", "Follow"),
        Binding("slash", "search", "Search"),
        Binding("l", "level", "Level"),
        Binding("R", "requeue", "Requeue"),
        Binding("a", "merged", "All ranks", show=False),
        Binding("o", "sort_trials", "Sort trials", show=False),
    ]

    def __init__(self, run_dir: Path, max_lines: int = 10_000, parse_budget: float = 0.15,
                 scan_slice: float = 0.005) -> None:
        super().__init__()
        self.run_dir = Path(run_dir)
        self.feed = RunFeed(self.run_dir, lambda: self.post_message(FeedReady()), max_lines, parse_budget,
                            scan_slice)
        self.reader = RunSeries(self.run_dir, keep=SIDE_POINTS)  # the side panel: a small window
        self._reader_lock = threading.Lock()
        self.status: RunStatus | None = None
        self.view: tuple | None = MERGED
        self.filter = LineFilter()
        self.follow = True
        self.stats: dict[tuple, SourceStats] = {}
        self.events: list[LiveEvent] = []
        self.report = None
        self.rate = 0.0
        self._diagnosed_final = False
        self._last_apply = 0.0
        self._apply_every = APPLY_EVERY
        self._skipped = 0  # the live scan's skipped lines as the title shows them (updated once a second)
        self._apply_pending = False
        self._apply_on_resume = False  # a batch arrived while covered: applied when this screen shows again
        self._after_view: tuple[int, Callable[[], None]] | None = None  # (view request, what to do on its answer)
        self.trial_sort = runview.TRIAL_SORTS[0]
        self._spec: JobSpec | Literal[False] | None = None  # read once by the forecast worker (False: unreadable)
        self._trial_cells: list[tuple] | None = None  # the trial table's rows as shown
        self._sweep = False  # the forecast said it is a sweep (its trials' table is shown)
        self._side: MetricsRead | None = None  # the side panel's last metrics read
        self._side_status: RunStatus | None = None  # the status its rate was last taken from
        self._ranks_built = False  # the rank table was built once
        self._rebuild_due = False  # new sources wait for a rebuild (_new_sources)

    def compose(self) -> ComposeResult:
        yield NavBar("runs", id="nav")
        yield Static(self.run_dir.name, id="run-title", markup=False)
        yield Static("", id="run-forecast", markup=False)
        yield Static("", id="run-attempts", markup=False)
        with Horizontal(id="run-body"):
            with Vertical(id="run-side"):
                yield RankGroupTable(id="ranks")  # flat up to 64 ranks, by groups past them
                yield MetricsPlot(id="plot")
            with Vertical(id="run-main"):
                yield DataTable(id="trials", cursor_type="row")
                yield RankLog(self.capp.ctx.max_lines, id="log")
                yield Input(placeholder="search (enter: apply, escape: clear)", id="search", compact=True)
        yield FindingsList(id="findings")
        yield Footer()

    def on_mount(self) -> None:
        self.set_class(self.app.size.width < runview.NARROW, "-narrow")
        self.set_class(self.app.size.height < runview.SHORT, "-short")
        self._fit_side()
        trials = self.query_one("#trials", DataTable)
        for key, title, width in runview.TRIAL_COLUMNS:
            trials.add_column(title, key=key, width=width)
        self.query_one(NavBar).info = self.run_dir.name
        self._show_findings()
        self._show_title()
        self.run_feed()
        self.read_metrics()
        self.set_interval(1.0, self._tick)
        self.query_one(RankLog).focus()
        self.call_after_refresh(gc.freeze)  # this screen's widgets: out of the collector's scans (see app.py)

    def on_resize(self, event: events.Resize) -> None:
        """Under NARROW columns the side panel goes under the log (app.tcss), under SHORT rows it and the
        findings take less of the height; the attempts' rows rewrap."""
        self.set_class(event.size.width < runview.NARROW, "-narrow")
        self.set_class(event.size.height < runview.SHORT, "-short")
        self._fit_side()
        if self.status is not None:
            self._show_attempts()

    def action_charts(self) -> None:
        from cockpit.tui.screens.charts import ChartsScreen

        self.app.push_screen(ChartsScreen(self.run_dir))

    def action_fix(self) -> None:
        from cockpit.tui.screens.fix import FixScreen

        def opened(run_dir: Path | None) -> None:
            if run_dir is not None:
                self.capp.open_run(run_dir)
        self.app.push_screen(FixScreen(self.run_dir), opened)

    def on_unmount(self) -> None:
        self.feed.stop()

    # --- the feed -------------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="feed", exit_on_error=False)
    def run_feed(self) -> None:
        self.feed.run()

    def on_feed_ready(self, _: FeedReady) -> None:
        """Apply what arrived, at most every APPLY_EVERY seconds: each apply repaints the log, and keys must
        not queue behind a repaint per batch when 64 ranks write at once. The answer to a view switch (a key
        the user pressed) goes on screen at once. While a full screen covers this one (the charts), nothing is
        applied: the feed keeps the lines (bounded) and they go on screen when this screen shows again, so the
        log storm takes no time from the screen on top (issue 29)."""
        if self._covered():
            self._apply_on_resume = True
            return
        wait = self._last_apply + self._apply_every - time.monotonic()
        if wait > 0 and not self.feed.answer_waiting:
            if not self._apply_pending:
                self._apply_pending = True
                self.set_timer(wait, self._apply_now)
            return
        self._apply_now()

    def on_screen_resume(self) -> None:
        if self._apply_on_resume:
            self._apply_on_resume = False
            self._apply_now()
            self._tick()

    def _apply_now(self) -> None:
        self._apply_pending = False
        self._last_apply = time.monotonic()
        d = self.feed.drain()
        if d is not None:
            self._apply_every = runview.apply_every(len(d.lines))
            self.apply(d)

    def apply(self, d: Drained) -> None:
        log = self.query_one(RankLog)
        if d.reset:
            log.replace(d.lines, d.width)
        elif d.lines:
            log.write_lines(d.lines, width=d.width)
        if self._after_view is not None and d.view_gen == self._after_view[0]:
            then, self._after_view = self._after_view[1], None
            then()
        if d.error:
            self.notify(d.error, title="live logs", severity="error", timeout=15)
        self.rate = d.lines_per_s
        new_sources = d.stats.keys() - self.stats.keys()
        self.stats.update(d.stats)  # the sources that changed since the last batch
        if new_sources:
            self._new_sources()
        # the feed sends a status only when its JSON changed (feed_state): no second comparison here, where a
        # 4,096-rank status's to_json costs ~50 ms of the UI thread, twice per status (issue 32)
        if d.status is not None:
            findings_changed = self.status is None or d.status.findings != self.status.findings
            self.status = d.status
            self._update_ranks()
            self.read_forecast()
            self._show_attempts()
            self.refresh_controls()
            if findings_changed:
                self._show_findings()
        if d.events:
            self.events += d.events
            self._show_findings()
            self.set_timer(1.0, self.diagnose)
        if self.status is not None and self.status.final and d.finished and not self._diagnosed_final:
            self._diagnosed_final = True
            self.diagnose()
            self.read_metrics()
        self._show_title()

    # --- the rank table -------------------------------------------------------------------------------------
    def _new_sources(self) -> None:
        """The table again with the sources that appeared: at once up to FLAT_UP_TO sources (or the first time),
        past them at most every REBUILD_EVERY seconds. A 4,096-rank run's history brings new sources in most
        of its first batches, and each rebuild (sort, groups, rows, then a pass) is 15-25 ms of the UI thread."""
        if self._rebuild_due:
            return
        if len(self.stats) <= FLAT_UP_TO or not self._ranks_built:
            self._rebuild_ranks()
            return
        self._rebuild_due = True
        self.set_timer(REBUILD_EVERY, self._rebuild_ranks)

    def _rebuild_ranks(self) -> None:
        self._rebuild_due, self._ranks_built = False, True
        table = self.query_one(RankTable)
        table.rebuild(self.stats)
        self._fit_side()
        self._update_ranks()
        table.select(self.view)

    def _fit_side(self) -> None:
        """The rank table's room as wide as its columns, SOURCE fitted to its labels (``node0:agent`` was cut
        to ``node0:age``): the side panel beside the log, or under NARROW the table beside the sparklines. At
        the default width, app.tcss's 38 (no inline width)."""
        need = self.query_one(RankTable).width_needed + 1  # and the panel's border, or the table's scrollbar
        wider = need if need > SIDE_WIDTH else None
        narrow = self.has_class("-narrow")
        self.query_one("#run-side").styles.width = None if narrow else wider
        self.query_one("#ranks").styles.width = wider if narrow else None

    def _update_ranks(self) -> None:
        table = self.query_one(RankGroupTable)
        now = self.capp.ctx.clock()
        ranks = (self.status.ranks if self.status else {}) or {}
        progress = (self.status.progress if self.status else {}) or {}
        live = self.status is None or not self.status.final  # an ended run's ages say nothing

        def facts(source: tuple, st: SourceStats) -> tuple[RankProgress | None, int | None, float | None]:
            host, rank = source
            if rank == "agent":
                return None, None, None if st.last_time is None or not live else now - st.last_time
            # its printed steps where the watchdog has no metrics of it (cockpit.tui.models.printed_progress)
            rec = shown_progress(progress.get(str(rank)), st.printed, host, now)
            # the log's own last write, once the watchdog saw it
            last = (rec.last_output if rec else None) or st.last_time
            end = ranks.get(str(rank))
            return rec, end.status if end is not None else None, None if last is None or not live else now - last

        def row(source: tuple, st: SourceStats) -> tuple[tuple, RankInfo]:
            rec, exit_code, seconds = facts(source, st)
            age = "-" if seconds is None else short_age(seconds)
            cells = (rank_step(rec), rank_rate(rec), age, rank_state(rec, exit_code))
            return cells, RankInfo.of(rec, exit_code, seconds)

        def info(source: tuple, st: SourceStats) -> RankInfo:
            return RankInfo.of(*facts(source, st))

        # past 64 ranks a slice at a time, and the cells only of the rows shown (widgets.rank_groups)
        table.show_rows(list(self.stats.items()), row, info)
        if self.status is not self._side_status:  # the panel's rate: the table's, from the same status
            self._side_status = self.status
            self._show_side()

    def _tick(self) -> None:
        if self._covered():
            return  # nothing here is seen: the rank table and the side panel catch up when it shows again
        self._update_ranks()
        self.read_metrics()
        self.read_forecast()
        if self._skipped != self.feed.skipped:
            self._skipped = self.feed.skipped
            self._show_title()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "ranks" or event.row_key is None:
            return
        view = self.query_one(RankTable).view_of(event.row_key.value)
        if view != self.view:
            self.set_view(view)

    def set_view(self, view: tuple | None, then: Callable[[], None] | None = None) -> None:
        """Show ``view`` through the filter: the feed answers with its lines (then ``then`` runs)."""
        self.view = view
        if self.feed.set_view(view, self.filter):
            self.run_feed()  # the run has ended and its reader with it: one for the answer
        self._after_view = None if then is None else (self.feed.gen, then)
        self._show_title()
        self.read_metrics()

    # --- the title line ---------------------------------------------------------------------------------------
    def _show_title(self) -> None:
        if not self._skipped and self.feed.skipped:
            self._skipped = self.feed.skipped  # the first skip shows at once; the count then moves with _tick
        # the skipped count is not per batch: a title that changes repaints the whole width of the screen
        text = runview.title_text(self.status, self.view, self.filter.describe(), self.follow, self._skipped,
                                  self.size.width - 2, len(self.stats))
        title = self.query_one("#run-title", Static)
        if str(title.content) != text:  # one line, fixed size: repaint it alone, no layout (this runs per batch)
            title.update(text, layout=False)

    def _show_attempts(self) -> None:
        """The timeline of the run's attempts (recover:), shown once it has more than one."""
        s = self.status
        text = attempt_line.timeline(s.attempts, s.goodput, self.capp.ctx.clock(), self.size.width - 2) if s else ""
        panel = self.query_one("#run-attempts", Static)
        panel.set_class(bool(text), "-shown")
        if str(panel.content) != text:
            panel.update(text)

    # --- metrics ----------------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="metrics", exit_on_error=False)
    def read_metrics(self) -> None:
        view = self.view
        with self._reader_lock:  # a cancelled worker's thread may still be reading
            self.reader.poll(runview.side_ranks(view))  # 4,096 ranks' files a second cost a core
            if self.reader.source() in (None, BEATS):  # none of those wrote metrics: maybe another rank did
                self.reader.poll()
            rank = runview.metrics_rank(view, self.reader.ranks())
            found = self.reader.series([rank]) if rank is not None else []  # build only the rank shown
            series = found[0] if found else None
            origin = self.reader.origins().get(rank) if rank is not None else None
        self.post_message(MetricsRead(series, origin))

    def on_metrics_read(self, message: MetricsRead) -> None:
        self._side = message
        self._show_side()

    def _show_side(self) -> None:
        """The side panel from the last metrics read, its rate from the status the rank table shows: read once a
        second, the panel's rate said the status before the table's, another number for the same rank."""
        # a sweep's metrics are its trials': the charts (c) show them. Not "rows were shown": a plain run's forecast
        # sets an empty trial table too, and its side panel said "a sweep" (issue 33 item 8)
        if self._side is None:
            return
        series, rate = self._side.series, None
        if series is not None and series.counts:  # the rank table's figure where it counts the same (item 8)
            rec = ((self.status.progress if self.status else {}) or {}).get(str(series.rank))
            st = next((st for (host, rank), st in self.stats.items() if rank == series.rank), None)
            if st is not None:  # the table's record of the rank, its printed steps included
                rec = shown_progress(rec, st.printed, rec.host if rec else "", self.capp.ctx.clock())
            rate = side_rate(series, self._side.origin, rec, bool(self.status and self.status.final), SPARK_CELLS)
        self.query_one(MetricsPlot).show(series, "a sweep: c charts its trials" if self._sweep else None, rate)

    # --- the forecast, and a sweep's trials --------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="forecast", exit_on_error=False)
    def read_forecast(self) -> None:
        status, now = self.status, self.capp.ctx.clock()
        if status is None:
            return
        from cockpit.insight.forecast_inputs import job_spec, run_forecast
        from cockpit.insight.sweep_table import sort_rows, trial_rows
        from cockpit.run.store import is_sweep

        if self._spec is None:
            self._spec = job_spec(self.run_dir) or False
        spec = self._spec or None
        if is_sweep(status):
            rows = sort_rows(trial_rows(self.run_dir, status, now, spec=spec), self.trial_sort)
            self.post_message(ForecastRead(runview.sweep_line(rows, self.trial_sort), rows))
        else:
            forecast = run_forecast(self.run_dir, status, spec=spec, now=now)
            self.post_message(ForecastRead(runview.forecast_text(forecast, status), None))

    def on_forecast_read(self, message: ForecastRead) -> None:
        line = self.query_one("#run-forecast", Static)
        if str(line.content) != message.line:
            line.update(message.line, layout=False)
        table = self.query_one("#trials", DataTable)
        self._sweep = message.trials is not None
        table.set_class(self._sweep, "-sweep")
        rows = [runview.trial_cells(r) for r in message.trials or ()]
        if rows != self._trial_cells:
            self._trial_cells = rows
            table.clear()
            for cells in rows:
                table.add_row(*cells, key=cells[0])

    def action_sort_trials(self) -> None:
        sorts = runview.TRIAL_SORTS
        self.trial_sort = sorts[(sorts.index(self.trial_sort) + 1) % len(sorts)]
        self.read_forecast()

    # --- follow, search, level ----------------------------------------------------------------------------------
    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        log = self.query_one(RankLog)
        log.auto_scroll = self.follow
        if self.follow:
            log.scroll_end(animate=False)
        self._show_title()

    def action_level(self) -> None:
        self.filter = self.filter.next_level()
        self.set_view(self.view)

    def action_merged(self) -> None:
        self.query_one(RankTable).select(MERGED)
        self.set_view(MERGED)

    def action_search(self) -> None:
        box = self.query_one("#search", Input)
        box.add_class("-open")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "search":
            self.filter = LineFilter(self.filter.level, event.value.strip())
            self.set_view(self.view)
            if not event.value.strip():
                event.input.remove_class("-open")
            self.query_one(RankLog).focus()

    def action_back(self) -> None:
        box = self.query_one("#search", Input)
        if box.has_focus:
            box.value = ""
            box.remove_class("-open")
            self.filter = LineFilter(self.filter.level, "")
            self.set_view(self.view)
            self.query_one(RankLog).focus()
            return
        self.app.pop_screen()
