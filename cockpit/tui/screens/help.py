"""Help: every key that works where help was asked for (the screen's, the focused widget's and the app's),
plus the mouse and the command palette. Built from the live bindings, so it cannot drift from them: a key
that a focused text field takes as text (q, 1) is not listed there, the others for the same action are."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import ActiveBinding, Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Static

GENERAL = [
    ("ctrl+p", "command palette: every cockpit action, themes"),
    ("mouse", "click rows, tabs and buttons; scroll logs and tables"),
]


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "close", "Close")]

    def __init__(self, where: str, bindings: dict[str, ActiveBinding]) -> None:
        super().__init__()
        self.where = where
        self.keys: list[tuple[list[str], str]] = []  # every key that does it, and what it does
        by_action: dict[tuple[str, str], list[str]] = {}

        def rank(ab: ActiveBinding) -> int:  # the screen's own keys first, then the app's, then the widget's
            return 0 if isinstance(ab.node, Screen) else 1 if isinstance(ab.node, App) else 2

        for ab in sorted(bindings.values(), key=rank):
            b = ab.binding
            if b.description and not b.system:
                keys = by_action.get((b.action, b.description))
                if keys is None:
                    keys = by_action[(b.action, b.description)] = []
                    self.keys.append((keys, b.description))
                keys.append(b.key)  # a key a focused text field takes is not among the live bindings

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog help"):
            yield Static(f"cockpit · keys on {self.where} (escape closes)", classes="dialog-title", markup=False)
            yield DataTable(id="help-keys", cursor_type="none", show_header=False, zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("key", "what it does")
        for keys, text in self.keys:
            table.add_row(" / ".join(self.app.get_key_display(Binding(k, "", "")) for k in keys), text)
        for key, text in GENERAL:
            table.add_row(key, text)

    def action_close(self) -> None:
        self.dismiss(None)
