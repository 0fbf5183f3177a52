"""A finding's evidence: each (file, line) it cites with the lines around it; enter or g shows the line in
the run view's log. The files are read in a worker."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from cockpit.tui.models.log_store import label

CONTEXT = 3


class EvidenceScreen(ModalScreen[tuple | None]):
    """Dismisses with (source, line, text) to show in the run view, or None."""

    BINDINGS = [Binding("escape", "close", "Close"), Binding("g", "go", "Show in log")]

    def __init__(self, run_dir: Path, title: str, hint: str, evidence: list[tuple]) -> None:
        super().__init__()
        self.run_dir, self.title_text, self.hint, self.evidence = run_dir, title, hint, evidence
        self.items: list[tuple] = []

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog evidence"):
            yield Static(self.title_text, classes="dialog-title", markup=False)
            yield Static(f"hint: {self.hint}", classes="dialog-note", markup=False)
            yield OptionList(id="evidence-list")
            yield Static("reading…", id="evidence-context", markup=False)

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def load(self) -> None:
        from cockpit.logs.diagnose.report import read_lines
        from cockpit.run.watch import discover

        by_path = {str(p): s for s, p in discover(self.run_dir).items()}
        by_source = {s: p for p, s in by_path.items()}
        items = []
        for where, line in self.evidence[:8]:
            source = where if isinstance(where, tuple) else by_path.get(str(where))
            path = by_source.get(where) if isinstance(where, tuple) else str(where)
            context: list[tuple[int, str]] = []
            if path is not None:
                try:
                    start = max(1, line - CONTEXT)
                    context = list(enumerate(islice(read_lines(path, follow=False), start - 1, line + CONTEXT), start))
                except OSError:
                    context = []
            items.append((source, line, path, context))
        self.app.call_from_thread(self._show, items)

    def _show(self, items: list[tuple]) -> None:
        self.items = items
        options = self.query_one(OptionList)
        for i, (source, line, path, _) in enumerate(items):
            where = label(source) if source else Path(path or "?").name
            options.add_option(Option(Text(f"{where} line {line}"), id=str(i)))
        if items:
            options.highlighted = 0
            options.focus()
        else:
            self.query_one("#evidence-context", Static).update("no evidence lines")

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id is None:  # never: every option has its item's index as id
            return
        _, line, path, context = self.items[int(event.option.id)]
        text = "\n".join(f"{'▶' if n == line else ' '} {n:>6} {t}" for n, t in context)
        self.query_one("#evidence-context", Static).update(text or f"{path}: cannot read line {line}")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.action_go()

    def action_go(self) -> None:
        index = self.query_one(OptionList).highlighted
        if index is None or not self.items:
            return
        source, line, _, context = self.items[index]
        text = next((t for n, t in context if n == line), None)
        self.dismiss((source, line, text))

    def action_close(self) -> None:
        self.dismiss(None)
