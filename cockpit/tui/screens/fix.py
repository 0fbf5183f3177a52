"""Fix and relaunch, from the run view: the diagnosis's configuration fixes (cockpit.insight.fixes, what `cockpit
diagnose RUN --fix` prints) with each finding's evidence line and reason, and the job file's diff. Nothing is
written until ``r``: then the fixed job file is written next to the original (never over a file) and
launched like Compose launches; the new run opens. escape cancels. Planning, writing and launching run in
workers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from cockpit.tui.screens.base import cockpit_app

if TYPE_CHECKING:
    from cockpit.insight.fixes import FixPlan


class FixScreen(ModalScreen[Path | None]):
    """Dismissed with the new run's directory after a relaunch, else None."""

    BINDINGS = [Binding("escape,q", "close", "Cancel"), Binding("r", "relaunch", "Write + relaunch")]

    def __init__(self, run_dir: Path) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.plan: FixPlan | None = None  # once read
        self._launching = False

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog stacks"):
            yield Static(f"fix {self.run_dir.name} (r: write the fixed job file and relaunch, escape: cancel)",
                         classes="dialog-title", markup=False)
            with VerticalScroll(id="fix-scroll"):
                yield Static("reading the diagnosis…", id="fix-text", markup=False)

    def on_mount(self) -> None:
        self.read_plan()

    def action_close(self) -> None:
        self.dismiss(None)

    @work(thread=True, exclusive=True, group="fix", exit_on_error=False)
    def read_plan(self) -> None:
        from cockpit.insight.diagnosis import diagnose_run
        from cockpit.insight.fixes import FixError, plan
        from cockpit.run.handle import Run

        try:
            run = Run.load(self.run_dir)  # one read for the diagnosis and the job file it fixes
            p = plan(run, diagnose_run(run), cockpit_app(self).ctx.fix_facts(self.run_dir))
        except (FixError, OSError) as exc:
            self.app.call_from_thread(self._show, None, str(exc))
            return
        if not p.proposals:
            text = p.verdict
        else:
            text = p.describe() + "\n\n" + (p.diff() or p.problem or "No change to the job file: the steps "
                                                                     "above are by hand.")
        self.app.call_from_thread(self._show, p, text)

    def _show(self, p, text: str) -> None:
        self.plan = p
        self.query_one("#fix-text", Static).update(text)

    def action_relaunch(self) -> None:
        if self.plan is None or self.plan.new_text is None:
            self.notify("no fixed job file to launch", title="fix", timeout=3)
            return
        if self._launching:
            return
        self._launching = True
        self.relaunch()

    @work(thread=True, group="fix-launch", exit_on_error=False)
    def relaunch(self) -> None:
        from cockpit.insight.fixes import write_fixed
        from cockpit.launch import LaunchError
        from cockpit.spec.model import SpecError

        ctx, plan = cockpit_app(self).ctx, self.plan
        if plan is None:  # never: action_relaunch starts this once the plan is read
            return
        try:
            path = write_fixed(plan)
            run_dir = ctx.relaunch(path, ctx.runs_dir)
        except (LaunchError, SpecError, OSError) as exc:  # say it, keep the review open
            self._launching = False
            self.app.call_from_thread(self.notify, f"{exc}", title="relaunch failed", severity="error")
            return
        self.app.call_from_thread(self.notify, f"wrote {path}", title="relaunched", timeout=5)
        self.app.call_from_thread(self.dismiss, run_dir)
