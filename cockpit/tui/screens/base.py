"""What every cockpit screen shares: worker failures become error notifications (never a crash, never
silence), and the header/footer frame."""

from __future__ import annotations

from textual.screen import Screen
from textual.worker import Worker, WorkerState


def report_worker_error(screen, event: Worker.StateChanged) -> None:
    if event.state == WorkerState.ERROR and event.worker.error is not None:
        err = event.worker.error
        screen.app.notify(f"{event.worker.name or event.worker.group}: {type(err).__name__}: {err}",
                          title="cockpit", severity="error", timeout=10)


class CockpitScreen(Screen):
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_worker_error(self, event)
