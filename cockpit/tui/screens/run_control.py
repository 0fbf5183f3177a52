"""Stop and requeue, for the run view: each asks or acts in a worker (the stop signals ranks, maybe over SSH
or through scancel), and each is offered only where it can act (check_action: requeue where the run's
launcher can requeue it from here, stop until the run has ended)."""

from __future__ import annotations

from pathlib import Path

from textual import work

from cockpit.run.store import RunStatus
from cockpit.tui.screens.base import CockpitScreen
from cockpit.tui.screens.dialogs import ConfirmScreen


class RunControls(CockpitScreen):
    """Mixed into a screen that shows one run (and binds the keys)."""

    run_dir: Path
    status: RunStatus | None
    _offered: tuple | None = None  # what check_action said of stop and requeue when the footer was last told

    def refresh_controls(self) -> None:
        """refresh_bindings where what check_action says of stop or requeue changed: each refresh recomposes the
        footer (its keys unmounted and mounted again, the screen laid out), and a 4,096-rank run's status comes
        every second or so while these answers change once or twice in a run (issue 32)."""
        offered = (self.check_action("stop", ()), self.check_action("requeue", ()))
        if offered != self._offered:
            self._offered = offered
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "requeue":
            if self.status is None or self.capp.ctx.requeue is None:
                return False
            from cockpit.launch import registry

            launcher = registry.known_for_run(self.status)
            return launcher is not None and launcher.can_requeue(self.status)
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
        from cockpit.fs.safeio import Untrusted
        from cockpit.launch import control
        from cockpit.run.store import read_status
        from cockpit.run.trust import own_run

        try:
            own_run(self.run_dir, "stop", "stop")  # another user's run is shown read-only
        except Untrusted as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error", timeout=10)
            return
        status = read_status(self.run_dir)
        if status is None or status.final:
            self.app.call_from_thread(self.notify, "the run has already ended", timeout=3)
            return
        grace = self.capp.ctx.stop_grace
        if control.request_stop(self.run_dir, status, grace):
            frozen = control.still_frozen(status, control.FROZEN_FOR)
            if frozen is None:
                self.app.call_from_thread(self.notify, "stopping: SIGTERM to the ranks, SIGKILL after the grace "
                                          "period")
                return
            status = control.stop_frozen(self.run_dir, status, grace, frozen, by="the TUI")  # it cannot act
            self.app.call_from_thread(self.notify, status.note, severity="warning", timeout=10)
            return
        warnings: list[str] = []  # no supervisor: scancel / every node over SSH / the processes here
        status = control.stop_orphan(self.run_dir, status, grace, by="the TUI", warn=warnings.append)
        self.app.call_from_thread(self.notify, "stopped (the run had no live supervisor): " + (status.note or ""),
                                  severity="warning" if warnings else "information", timeout=8)

    def action_requeue(self) -> None:
        self.requeue()

    @work(thread=True, exclusive=True, group="requeue", exit_on_error=False)
    def requeue(self) -> None:
        from cockpit.fs.safeio import Untrusted

        fn = self.capp.ctx.requeue
        if fn is not None:
            try:
                done = fn(self.run_dir)
            except Untrusted as exc:  # another user's run: read-only
                self.app.call_from_thread(self.notify, str(exc), severity="error", timeout=10)
                return
            self.app.call_from_thread(self.notify, f"requeue requested: {done}" if done else "requeue requested")
