"""What went wrong in a run, for the run view: the findings panel (hang findings live from status.json, then
the diagnosis or the live events), the diagnosis worker, the stacks dialog, and the jump from a finding's
evidence to its line in the log (the source's view, follow paused)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual import work
from textual.widgets import OptionList
from textual.worker import get_current_worker

from cockpit.logs.diagnose.model import Report
from cockpit.run.store import RunStatus
from cockpit.tui.messages import Diagnosed
from cockpit.tui.models import run_view as runview
from cockpit.tui.models.log_filter import LineFilter
from cockpit.tui.models.run_feed import LiveEvent, SourceStats
from cockpit.tui.screens.base import CockpitScreen
from cockpit.tui.screens.evidence import EvidenceScreen
from cockpit.tui.widgets.findings_list import FindingsList
from cockpit.tui.widgets.rank_log import RankLog
from cockpit.tui.widgets.rank_table import RankTable


class RunFindings(CockpitScreen):
    """Mixed into the run view, which holds the state below and shows a view (set_view) and its title."""

    run_dir: Path
    status: RunStatus | None
    report: Report | None
    events: list[LiveEvent]
    stats: dict[tuple, SourceStats]
    view: tuple | None
    filter: LineFilter
    follow: bool
    set_view: Callable[..., None]
    _show_title: Callable[[], None]

    def _hang(self) -> list:
        return (self.status.findings if self.status else None) or []

    def _show_findings(self) -> None:
        self.query_one(FindingsList).show(runview.finding_rows(self._hang(), self.report, self.events))

    def action_diagnose(self) -> None:
        self.diagnose()

    def action_stacks(self) -> None:
        from cockpit.tui.screens.stacks import StacksScreen

        self.app.push_screen(StacksScreen(self.run_dir))

    @work(thread=True, exclusive=True, group="diagnose", exit_on_error=False)
    def diagnose(self) -> None:
        from dataclasses import replace

        from cockpit.tui.models.diagnose_process import APART_FROM, diagnose_apart

        if len(self.stats) >= APART_FROM:  # thousands of logs: parsed in a process of its own, not under our GIL
            report = diagnose_apart(self.run_dir)
        else:
            from cockpit.insight.diagnosis import diagnose_run
            from cockpit.run.handle import Run

            report = diagnose_run(Run.load(self.run_dir))
        hidden = runview.HIDDEN_FROM_REPORT
        report = replace(report, findings=tuple(f for f in report.findings if f.code not in hidden))
        if not get_current_worker().is_cancelled:  # a newer diagnosis replaced this one: do not show a stale one
            self.post_message(Diagnosed(report))

    def on_diagnosed(self, message: Diagnosed) -> None:
        self.report = message.report
        self._show_findings()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        detail = runview.finding_detail(event.option.id or "", self._hang(), self.report, self.events, self.run_dir)
        if detail is not None:
            self.app.push_screen(EvidenceScreen(self.run_dir, *detail), self.go_to)

    def go_to(self, target: tuple | None) -> None:
        """Show an evidence line: its source's view, scrolled to it, follow paused."""
        if not target:
            return
        source, line_no, text = target
        if source is not None and source in self.stats and source != self.view:
            self.filter = LineFilter()
            self.set_view(source, then=lambda: self._show_line(source, line_no, text))
            self.query_one(RankTable).select(source)
            return
        self._show_line(source, line_no, text)

    def _show_line(self, source: tuple | None, line_no: int, text: str | None) -> None:
        log = self.query_one(RankLog)
        st = self.stats.get(source) if source is not None else None  # the merged view has no stats
        text, near = runview.evidence_target(source, line_no, text, self.view, None if st is None else st.lines,
                                             len(log.lines))
        y = log.find_line(text, near) if text is not None else None
        if y is None:
            self.notify("that line is no longer in the view (the log file has it)", timeout=4)
            return
        self.follow = log.auto_scroll = False
        log.scroll_to(y=max(0, y - 2), animate=False)
        self._show_title()
