"""What every cockpit screen shares: worker failures become error notifications (never a crash, never
silence), the header/footer frame, and the app as screens may use it (``CockpitAppLike``: textual types
``self.app`` as a bare ``App``; the protocol names what the cockpit app adds and a screen may read)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.worker import Worker, WorkerState

if TYPE_CHECKING:
    from textual.signal import Signal

    from cockpit.fleet.records import NodeReport
    from cockpit.tui.models.context import Context
    from cockpit.tui.models.fleet import Selection
    from cockpit.tui.models.gpu_history import History


class CockpitAppLike(Protocol):
    """What the cockpit app (cockpit.tui.app.CockpitApp) shares with its screens."""

    ctx: Context
    nodes: list[NodeReport]
    history: History
    selection: Selection
    fleet_changed: Signal[None]
    selection_changed: Signal[None]

    def open_run(self, run_dir: Path) -> None: ...

    def set_selection(self, selection: Selection) -> None: ...


def cockpit_app(node: DOMNode) -> CockpitAppLike:
    """The running cockpit app of a screen or widget (every cockpit screen runs inside CockpitApp)."""
    return cast("CockpitAppLike", node.app)


def report_worker_error(node: DOMNode, event: Worker.StateChanged) -> None:
    if event.state == WorkerState.ERROR and event.worker.error is not None:
        err = event.worker.error
        node.app.notify(f"{event.worker.name or event.worker.group}: {type(err).__name__}: {err}",
                        title="cockpit", severity="error", timeout=10)


class CockpitScreen(Screen[None]):
    @property
    def capp(self) -> CockpitAppLike:
        return cockpit_app(self)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_worker_error(self, event)

    def _covered(self) -> bool:
        """Whether another screen, not a dialog over this one (which shows it behind), is on top: this screen is
        not seen (another mode's, or under a full screen)."""
        top = self.app.screen
        return top is not self and not isinstance(top, ModalScreen)
