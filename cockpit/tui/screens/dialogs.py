"""Small modal dialogs: ask for a path, confirm an action, save or discard edits. Each dismisses with its
answer. They share ``Dialog``: a question waits for its answer, so the app's mode keys (F2-F4) do not act
while one is shown (escape always cancels)."""

from __future__ import annotations

from typing import TypeVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

T = TypeVar("T")


class Dialog(ModalScreen[T]):
    """A question that waits for its answer (see the module docstring)."""


class PathScreen(Dialog[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, value: str, note: str = "") -> None:
        super().__init__()
        self.title_text, self.value, self.note = title, value, note

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title", markup=False)
            yield Input(self.value, id="path", compact=True)
            if self.note:
                yield Static(self.note, classes="dialog-note", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button("OK", id="ok", variant="primary", compact=True)
                yield Button("Cancel", id="cancel", compact=True)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self.query_one("#path", Input).value.strip() or None if event.button.id == "ok" else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmScreen(Dialog[bool]):
    BINDINGS = [Binding("escape,n", "answer(False)", "No"), Binding("y", "answer(True)", "Yes")]

    def __init__(self, question: str, yes: str = "Yes") -> None:
        super().__init__()
        self.question, self.yes = question, yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.question, classes="dialog-title", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="warning", compact=True)
                yield Button("No (n)", id="no", compact=True)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class UnsavedScreen(Dialog[str | None]):
    """Edits that are not saved: "save", "discard", or None (cancel: stay)."""

    BINDINGS = [Binding("s", "answer('save')", "Save"), Binding("d", "answer('discard')", "Discard"),
                Binding("escape,c", "answer('')", "Cancel")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.question, classes="dialog-title", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Save (s)", id="save", variant="primary", compact=True)
                yield Button("Discard (d)", id="discard", variant="warning", compact=True)
                yield Button("Cancel (c)", id="cancel", compact=True)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id if event.button.id in ("save", "discard") else None)

    def action_answer(self, answer: str) -> None:
        self.dismiss(answer or None)
