"""The run view: one run's logs (merged with [host:rank] prefixes, or one rank / torchrun agent), follow,
search and a level filter; per-rank status; loss and samples/s; the diagnosis with links to its evidence;
stop (and requeue for Slurm runs where the launcher offers it).

Data flow: the RunFeed follows the run in a process of its own (cockpit.tui.feedproc) and a thread worker reads
its batches; the feed wakes the screen with one coalescing FeedReady message, and the handler drains the batch
waiting (which asks the feed for the next). A view or filter change is a request to the feed, answered with
the view's lines a moment later. Metrics and the diagnosis are read in their own workers."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Input, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from cockpit.runs import RunStatus
from cockpit.tui.logfilter import LineFilter
from cockpit.tui.logstore import MERGED, label
from cockpit.tui.messages import Diagnosed, FeedReady, MetricsRead
from cockpit.tui.metrics import MetricsReader
from cockpit.tui.ranktable import COLUMNS, rank_rate, rank_state, rank_step, short_age, source_order
from cockpit.tui.runfeed import Drained, LiveEvent, RunFeed, SourceStats
from cockpit.tui.screens.base import CockpitScreen
from cockpit.tui.screens.dialogs import ConfirmScreen
from cockpit.tui.screens.evidence import EvidenceScreen
from cockpit.tui.widgets.metrics_plot import MetricsPlot
from cockpit.tui.widgets.navbar import NavBar
from cockpit.tui.widgets.rank_log import RankLog

ALL = "all"
APPLY_EVERY = 0.05  # seconds: at most 20 log repaints a second
# under a storm (a batch of more than STORM_LINES lines), at most 10: each repaint redraws every row of the log,
# and on a busy machine a key press that lands behind one waits for it (bench_tui: key p50 halved)
APPLY_EVERY_STORM, STORM_LINES = 0.1, 1000


class RunViewScreen(CockpitScreen):
    TITLE = "Run"
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("f", "toggle_follow", "Follow"),
        Binding("slash", "search", "Search"),
        Binding("l", "level", "Level"),
        Binding("a", "merged", "All ranks", show=False),
        Binding("d", "diagnose", "Diagnose"),
        Binding("k", "stacks", "Stacks"),
        Binding("s", "stop", "Stop"),
        Binding("R", "requeue", "Requeue"),
    ]

    def __init__(self, run_dir: Path, max_lines: int = 10_000, parse_budget: float = 0.15,
                 scan_slice: float = 0.005) -> None:
        super().__init__()
        self.run_dir = Path(run_dir)
        self.feed = RunFeed(self.run_dir, lambda: self.post_message(FeedReady()), max_lines, parse_budget,
                            scan_slice)
        self.reader = MetricsReader(self.run_dir)
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
        self._cells: dict[tuple, tuple] = {}  # the cells shown in each source's row
        self._after_view: tuple[int, Callable[[], None]] | None = None  # (view request, what to do on its answer)

    def compose(self) -> ComposeResult:
        yield NavBar("runs", id="nav")
        yield Static(self.run_dir.name, id="run-title", markup=False)
        with Horizontal(id="run-body"):
            with Vertical(id="run-side"):
                yield DataTable(id="ranks", cursor_type="row", show_header=True)
                yield MetricsPlot(id="plot")
            with Vertical(id="run-main"):
                yield RankLog(self.app.ctx.max_lines, id="log")
                yield Input(placeholder="search (enter: apply, escape: clear)", id="search", compact=True)
        yield OptionList(id="findings")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#ranks", DataTable)
        # fixed widths: rows arrive one source at a time, and the panel must not jump (nor snapshots vary)
        for key, title, width in COLUMNS:
            table.add_column(title, key=key, width=width)
        table.add_row("all ranks", *[""] * (len(COLUMNS) - 1), key=ALL)
        self.query_one(NavBar).info = self.run_dir.name
        self._show_findings()
        self._show_title()
        self.run_feed()
        self.read_metrics()
        self.set_interval(1.0, self._tick)
        self.query_one(RankLog).focus()
        self.call_after_refresh(gc.freeze)  # this screen's widgets: out of the collector's scans (see app.py)

    def on_unmount(self) -> None:
        self.feed.stop()

    # --- the feed -------------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="feed", exit_on_error=False)
    def run_feed(self) -> None:
        self.feed.run()

    def on_feed_ready(self, _: FeedReady) -> None:
        """Apply what arrived, at most every APPLY_EVERY seconds: each apply repaints the log, and keys must
        not queue behind a repaint per batch when 64 ranks write at once. The answer to a view switch (a key
        the user pressed) goes on screen at once."""
        wait = self._last_apply + self._apply_every - time.monotonic()
        if wait > 0 and not self.feed.answer_waiting:
            if not self._apply_pending:
                self._apply_pending = True
                self.set_timer(wait, self._apply_now)
            return
        self._apply_now()

    def _apply_now(self) -> None:
        self._apply_pending = False
        self._last_apply = time.monotonic()
        d = self.feed.drain()
        if d is not None:
            self._apply_every = APPLY_EVERY_STORM if len(d.lines) > STORM_LINES else APPLY_EVERY
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
        new_sources = set(d.stats) - set(self.stats)
        self.stats = d.stats
        if new_sources:
            self._rebuild_ranks()
        if d.status is not None and (self.status is None or d.status.to_json() != self.status.to_json()):
            findings_changed = self.status is None or d.status.findings != self.status.findings
            self.status = d.status
            self._update_ranks()
            self.refresh_bindings()
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
    def _rebuild_ranks(self) -> None:
        table = self.query_one("#ranks", DataTable)
        current = self.view
        table.clear()
        self._cells.clear()
        table.add_row("all ranks", *[""] * (len(COLUMNS) - 1), key=ALL)
        for source in sorted(self.stats, key=source_order):
            table.add_row(label(source)[1:-1], *[""] * (len(COLUMNS) - 1), key=repr(source))
        self._update_ranks()
        keys = [ALL] + [repr(s) for s in sorted(self.stats, key=source_order)]
        want = ALL if current is MERGED else repr(current)
        if want in keys:
            table.move_cursor(row=keys.index(want), animate=False)

    def _update_ranks(self) -> None:
        table = self.query_one("#ranks", DataTable)
        now = self.app.ctx.clock()
        ranks = (self.status.ranks if self.status else {}) or {}
        progress = (self.status.progress if self.status else {}) or {}
        for source, st in self.stats.items():
            live = self.status is None or not self.status.final  # an ended run's ages say nothing
            host, rank = source
            rec = progress.get(str(rank), {}) if rank != "agent" else {}
            last = rec.get("last_output") or st.last_time  # the log's own last write, once the watchdog saw it
            age = "-" if last is None or not live else short_age(now - last)
            end = ranks.get(str(rank)) if rank != "agent" else None
            exit_code = end.status if end is not None else None
            cells = (rank_step(rec), rank_rate(rec), age, rank_state(rec, exit_code))
            if self._cells.get(source) == cells:
                continue  # every update_cell invalidates the whole table's render cache: only real changes
            try:
                for (key, _, _), value in zip(COLUMNS[1:], cells, strict=True):
                    table.update_cell(repr(source), key, value)
            except KeyError:  # row not there yet: the next rebuild adds it
                continue
            self._cells[source] = cells

    def _tick(self) -> None:
        self._update_ranks()
        self.read_metrics()
        if self._skipped != self.feed.skipped:
            self._skipped = self.feed.skipped
            self._show_title()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "ranks" or event.row_key is None:
            return
        key = event.row_key.value
        view = MERGED if key == ALL else next((s for s in self.stats if repr(s) == key), MERGED)
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
        s = self.status
        state = "reading…" if s is None else s.state + (f" (exit {s.exit_code})" if s.final else "")
        launcher = "" if s is None else f" · {s.launcher}"
        ranks = "" if s is None or s.world_size is None else f" · {s.world_size} ranks"
        view = "all ranks" if self.view is MERGED else label(self.view)
        follow = "follow" if self.follow else "paused"
        parts = [f"{state}{launcher}{ranks}", view, self.filter.describe(), follow]
        if not self._skipped and self.feed.skipped:
            self._skipped = self.feed.skipped  # the first skip shows at once; the count then moves with _tick
        if self._skipped:  # not per batch: a title that changes repaints the whole width of the screen
            parts.append(f"live scan skipped {self._skipped} lines (d: full diagnosis)")
        text = " · ".join(parts)
        title = self.query_one("#run-title", Static)
        if str(title.content) != text:  # one line, fixed size: repaint it alone, no layout (this runs per batch)
            title.update(text, layout=False)

    # --- findings ---------------------------------------------------------------------------------------------
    def _show_findings(self) -> None:
        findings = self.query_one("#findings", OptionList)
        findings.clear_options()
        hang = (self.status.findings if self.status else None) or []
        findings.add_options([Option(Text(f"{f['kind'].upper():<7} {f['text']}",
                                          style="bold red" if f["severity"] == "error" else "bold yellow"),
                                     id=f"h{i}") for i, f in enumerate(hang)])
        if self.report is not None:
            items = [Option(Text(f"{f.severity.upper():<7} {f.title}"), id=f"f{i}")
                     for i, f in enumerate(self.report.findings)]
            findings.add_options(items or [Option("diagnosis: no problems found", id="none", disabled=True)])
        elif self.events:
            findings.add_options([Option(Text(f"live    {label(e.source)} {e.kind}: {e.text}"), id=f"e{i}")
                                  for i, e in enumerate(self.events)])
        elif not hang:
            findings.add_option(Option("diagnosis: nothing found yet (d: diagnose the logs now)", id="none",
                                       disabled=True))

    def action_diagnose(self) -> None:
        self.diagnose()

    def action_stacks(self) -> None:
        from cockpit.tui.screens.stacks import StacksScreen

        self.app.push_screen(StacksScreen(self.run_dir))

    @work(thread=True, exclusive=True, group="diagnose", exit_on_error=False)
    def diagnose(self) -> None:
        from dataclasses import replace

        from cockpit.rundiag import diagnose_run

        report = diagnose_run(self.run_dir)
        hang = {"stall", "stopped", "straggler"}  # shown live from status.json above the report
        report = replace(report, findings=tuple(f for f in report.findings if f.code not in hang))
        if not get_current_worker().is_cancelled:  # a newer diagnosis replaced this one: do not show a stale one
            self.post_message(Diagnosed(report))

    def on_diagnosed(self, message: Diagnosed) -> None:
        self.report = message.report
        self._show_findings()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        oid = event.option.id or ""
        hang = (self.status.findings if self.status else None) or []
        if oid.startswith("h") and int(oid[1:]) < len(hang):
            f = hang[int(oid[1:])]
            nxt = f" (next: {f['next']})" if f.get("next") else ""
            title, hint = f"{f['kind'].upper()} {f['text']}", f["hint"] + nxt
            from cockpit.hang.finding import evidence_of

            evidence = list(evidence_of(f, self.run_dir))
        elif oid.startswith("f") and self.report is not None:
            f = self.report.findings[int(oid[1:])]
            title, hint, evidence = f"{f.severity.upper()} {f.title}", f.hint, list(f.evidence)
        elif oid.startswith("e"):
            e = self.events[int(oid[1:])]
            title, hint, evidence = f"{e.kind} on {label(e.source)}", e.text, [(e.source, e.line)]
        else:
            return
        self.app.push_screen(EvidenceScreen(self.run_dir, title, hint, evidence), self.go_to)

    def go_to(self, target: tuple | None) -> None:
        """Show an evidence line: its source's view, scrolled to it, follow paused."""
        if not target:
            return
        source, line_no, text = target
        if source is not None and source in self.stats and source != self.view:
            self.filter = LineFilter()
            self.set_view(source, then=lambda: self._scroll_to(source, line_no, text))
            self._select_rank_row(source)
            return
        self._scroll_to(source, line_no, text)

    def _scroll_to(self, source: tuple | None, line_no: int, text: str | None) -> None:
        log = self.query_one(RankLog)
        st = self.stats.get(source)
        merged = self.view is MERGED
        if text is not None and merged and source is not None:
            text = f"{label(source)} {text}"  # the merged view prefixes every line with its [host:rank]
        near = None if st is None or merged else line_no - 1 - (st.lines - len(log.lines))
        y = log.find_line(text, near) if text is not None else None
        if y is None:
            self.notify("that line is no longer in the view (the log file has it)", timeout=4)
            return
        self.follow = log.auto_scroll = False
        log.scroll_to(y=max(0, y - 2), animate=False)
        self._show_title()

    def _select_rank_row(self, source: tuple) -> None:
        table = self.query_one("#ranks", DataTable)
        keys = [ALL] + [repr(s) for s in sorted(self.stats, key=source_order)]
        if repr(source) in keys:
            table.move_cursor(row=keys.index(repr(source)), animate=False)

    # --- metrics ----------------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="metrics", exit_on_error=False)
    def read_metrics(self) -> None:
        view = self.view
        with self._reader_lock:  # a cancelled worker's thread may still be reading
            self.reader.poll()
            rank = view[1] if view is not MERGED and view[1] != "agent" else None
            ranks = self.reader.ranks()
            if rank not in ranks:
                rank = ranks[0] if ranks else None
            series = None if rank is None else self.reader.series(rank)
        self.post_message(MetricsRead(series))

    def on_metrics_read(self, message: MetricsRead) -> None:
        self.query_one(MetricsPlot).show(message.series)

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
        self._select_rank_row_all()
        self.set_view(MERGED)

    def _select_rank_row_all(self) -> None:
        self.query_one("#ranks", DataTable).move_cursor(row=0, animate=False)

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

    # --- stop, requeue ----------------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "requeue":
            return self.status is not None and self.status.launcher == "slurm" and self.app.ctx.requeue is not None
        if action == "stop":
            return self.status is None or not self.status.final or None
        return True

    def action_stop(self) -> None:
        self.ask_stop()

    @work(exclusive=True, group="stop", exit_on_error=False)
    async def ask_stop(self) -> None:
        if not await self.app.push_screen_wait(ConfirmScreen(f"Stop {self.run_dir.name}?", "Stop")):
            return
        self.stop_run()

    @work(thread=True, exclusive=True, group="stop-run", exit_on_error=False)
    def stop_run(self) -> None:
        from cockpit.launch import control
        from cockpit.runs import read_status

        status = read_status(self.run_dir)
        if status is None or status.final:
            self.app.call_from_thread(self.notify, "the run has already ended", timeout=3)
            return
        grace = self.app.ctx.stop_grace
        if control.request_stop(self.run_dir, status, grace):
            self.app.call_from_thread(self.notify, "stopping: SIGTERM to the ranks, SIGKILL after the grace period")
            return
        warnings: list[str] = []  # no supervisor: scancel / every node over SSH / the processes here
        status = control.stop_orphan(self.run_dir, status, grace, by="the TUI", warn=warnings.append)
        self.app.call_from_thread(self.notify, "stopped (the run had no live supervisor): " + status.note,
                                  severity="warning" if warnings else "information", timeout=8)

    def action_requeue(self) -> None:
        self.requeue()

    @work(thread=True, exclusive=True, group="requeue", exit_on_error=False)
    def requeue(self) -> None:
        fn = self.app.ctx.requeue
        if fn is not None:
            done = fn(self.run_dir)
            self.app.call_from_thread(self.notify, f"requeue requested: {done}" if done else "requeue requested")

