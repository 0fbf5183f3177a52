"""The log pane of the run view: textual's Log, bounded (max_lines), fed in batches by the run feed."""

from __future__ import annotations

from rich.cells import cell_len
from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import Log


class RankLog(Log):
    # textual re-lays out the whole screen whenever a widget's virtual size changes, and a log's grows with
    # every batch (until max_lines). The pane's own size is fixed by the stylesheet, so only its scrollbars
    # need to know: they are updated directly, and a batch costs a repaint of the pane, not a layout.
    virtual_size = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, size: Size) -> None:
        if self.is_mounted:
            self._scroll_update(size)

    def __init__(self, max_lines: int = 10_000, **kwargs) -> None:
        super().__init__(max_lines=max_lines, auto_scroll=True, **kwargs)

    def _update_size(self, updates: int, lines: list[str]) -> None:
        """The widest line, for the horizontal scrollbar. Textual's Log starts a worker thread per write to
        measure it; at tens of writes a second that costs more than measuring here (ASCII: its length)."""
        if lines:
            width = max(len(t) if t.isascii() else cell_len(self._process_line(t)) for t in lines)
            self._update_maximum_width(updates, width)

    def replace(self, lines: list[str]) -> None:
        """Show exactly ``lines`` (a view or filter change)."""
        self.clear()
        if lines:
            self.write_lines(lines[-self.max_lines:] if self.max_lines else lines)

    def find_line(self, text: str, near: int | None = None) -> int | None:
        """Index of a line equal to ``text`` (the one at ``near`` if it matches, else the last one)."""
        lines = self.lines
        if near is not None and 0 <= near < len(lines) and lines[near] == text:
            return near
        for i in range(len(lines) - 1, -1, -1):
            if lines[i] == text:
                return i
        return None
