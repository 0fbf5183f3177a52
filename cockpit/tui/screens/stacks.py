"""Every rank's Python stack (cockpit.hang), asked for in a worker and shown in a scrollable view: what
`cockpit stacks RUN` prints, with a row per node's links above it (cockpit.hang.linkwords.link_summary: its
interfaces, its connections by kind, the link finding if any). escape closes; r asks the ranks again."""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from cockpit.run import layout


class StacksScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q", "close", "Close"), Binding("r", "refresh", "Ask again")]

    def __init__(self, run_dir: Path) -> None:
        super().__init__()
        self.run_dir = run_dir

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog stacks"):
            yield Static(f"stacks of {self.run_dir.name} (r: ask again, escape: close)", classes="dialog-title",
                         markup=False)
            yield Static("", id="stacks-links", markup=False)
            with VerticalScroll(id="stacks-scroll"):
                yield Static("asking every rank…", id="stacks-text", markup=False)

    def on_mount(self) -> None:
        self.query_one("#stacks-links", Static).display = False  # until a gather brings link rows
        self.fetch()

    def action_refresh(self) -> None:
        self.query_one("#stacks-text", Static).update("asking every rank…")
        self.fetch()

    def action_close(self) -> None:
        self.dismiss(None)

    @work(thread=True, exclusive=True, exit_on_error=False)
    def fetch(self) -> None:
        from cockpit.hang import finding
        from cockpit.launch import registry
        from cockpit.run.store import read_status

        status = read_status(self.run_dir)
        links = ""
        if status is None or status.final:
            kept = layout.stacks_reports(self.run_dir)
            text = (_kept_text(kept[-1]) if kept else "the run has ended: no process left to ask")
        else:
            from cockpit.fs.safeio import Untrusted
            from cockpit.run.trust import own_run

            try:
                own_run(self.run_dir, "stacks", "signal the ranks of")  # another user's run: read-only
                evidence = registry.for_run(status, fallback="local").stacks(self.run_dir, status, timeout=5.0)
                text = finding.stacks_report(evidence) if evidence else "no running rank to ask"
                links = _links(evidence)
            except (OSError, ValueError, KeyError, Untrusted) as exc:
                text = f"could not ask the ranks: {exc}"
        self.app.call_from_thread(self._show, text, links)

    def _show(self, text: str, links: str) -> None:
        self.query_one("#stacks-text", Static).update(text)
        row = self.query_one("#stacks-links", Static)
        row.update(links)
        row.display = bool(links)


def _links(evidence: dict) -> str:
    """The link rows of the transport evidence gathered with the stacks ("" where none was: a Slurm run)."""
    from cockpit.hang.linkwords import link_summary

    gathered = next((e.link for e in evidence.values() if e.link is not None), None)
    return "\n".join(link_summary(gathered)) if gathered is not None else ""


def _kept_text(path) -> str:
    """The stacks kept at a stall: bounded, a regular file only (cockpit.fs.safeio)."""
    from cockpit.fs import safeio

    try:
        return safeio.read_text(path, KEPT_BYTES)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"


KEPT_BYTES = 8 << 20  # the stacks of 64 ranks with 8 threads each: ~1 MB
