"""Compose's side panel: the form check's summary (or its problems) over two read-only tabs, the preview of
exactly what would run and the job's YAML."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static, TabbedContent, TabPane, TextArea


class JobPreview(Vertical):
    def compose(self) -> ComposeResult:
        yield Static("", id="problems", markup=False)
        with TabbedContent(id="preview-tabs"):
            with TabPane("Preview", id="tab-preview"):
                yield TextArea("", id="preview", read_only=True, soft_wrap=False, show_cursor=False)
            with TabPane("YAML", id="tab-yaml"):
                yield TextArea("", id="yaml", read_only=True, soft_wrap=False, show_line_numbers=True,
                               show_cursor=False)

    def show(self, summary: str, valid: bool, preview: str, yaml: str) -> None:
        problems = self.query_one("#problems", Static)
        problems.update(summary)
        problems.set_class(not valid, "-invalid")
        for area_id, text in (("#preview", preview), ("#yaml", yaml)):
            area = self.query_one(area_id, TextArea)
            if area.text != text:
                area.load_text(text)
                area.refresh()  # load_text repaints only when the size changes; a same-sized job stayed old
