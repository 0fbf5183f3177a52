"""The log pane of the run view: textual's Log, bounded (max_lines), fed in batches by the run feed."""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.cells import cell_len
from textual.geometry import Size
from textual.reactive import Reactive
from textual.scroll_view import ScrollView
from textual.widgets import Log

# what str.splitlines() splits on besides "\n" (which a tailed line never holds)
_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


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
        self._at_end = True  # the last scroll left the view at the log's end (a resize keeps it there)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._at_end = new_value >= self.max_scroll_y

    def on_resize(self) -> None:
        """A following log stays at its end: a terminal made smaller (120x36 to 80x24) kept the top line where
        it was, the last lines went under the panel, and new lines no longer scrolled (no longer at the end),
        while the title still said ``follow``."""
        if self.auto_scroll and self._at_end:
            self.call_after_refresh(self.scroll_end, animate=False, immediate=True, x_axis=False)

    # replaces Log's threaded worker (same caller, same arguments) with an inline measure
    def _update_size(self, updates: int, lines: list[str]) -> None:  # type: ignore[override]
        """The widest line, for the horizontal scrollbar. Textual's Log starts a worker thread per write to
        measure it; at tens of writes a second that costs more than measuring here (ASCII: its length)."""
        if lines:
            width = max(len(t) if t.isascii() else cell_len(self._process_line(t)) for t in lines)
            self._update_maximum_width(updates, width)

    def write_lines(self, lines: Iterable[str], scroll_end: bool | None = None, width: int | None = None) -> RankLog:
        """Log.write_lines, cheaper for the thousands of lines a batch brings: one scan for line breaks over
        the whole batch instead of a splitlines() per line (same lines: a line without breaks is itself, an
        empty one is dropped), and no per-line discard of render-cache entries that cannot exist (the lines
        are new, past every cached row). ``width``: the lines come log-ready from the feed process (no
        breaks, no empty line; cockpit.tui.models.feed_state.log_ready) and the widest is ``width`` long: no scan
        at all."""
        lines = lines if isinstance(lines, list) else list(lines)
        if not lines:
            return self
        if width is None:
            if _BREAKS.search("\n".join(lines)):
                return super().write_lines(lines, scroll_end)
            lines = lines if all(lines) else [t for t in lines if t]
        new_lines = lines
        is_vertical_scroll_end = self.is_vertical_scroll_end
        auto_scroll = self.auto_scroll if scroll_end is None else scroll_end
        start_line = len(self._lines)
        self._lines.extend(new_lines)
        if self.max_lines is not None and len(self._lines) > self.max_lines:
            self._prune_max_lines()
        self.virtual_size = Size(self._width, len(self._lines))
        if width is None:
            self._update_size(self._updates, new_lines)
        else:
            self._update_maximum_width(self._updates, width)
        first = len(self._lines) - len(new_lines)
        cache = self._render_line_cache
        for y in [y for y in cache.keys() if y >= first]:  # noqa: SIM118 (an LRUCache)
            cache.discard(y)
        ScrollView.refresh_lines(self, start_line, len(new_lines))  # Log's, less the discards
        if auto_scroll and not self.is_vertical_scrollbar_grabbed and is_vertical_scroll_end:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        else:
            self.refresh()
        return self

    def replace(self, lines: list[str], width: int | None = None) -> None:
        """Show exactly ``lines`` (a view or filter change)."""
        self.clear()
        if lines:
            self.write_lines(lines[-self.max_lines:] if self.max_lines else lines, width=width)

    def find_line(self, text: str, near: int | None = None) -> int | None:
        """Index of a line equal to ``text`` (the one at ``near`` if it matches, else the last one)."""
        lines = self.lines
        if near is not None and 0 <= near < len(lines) and lines[near] == text:
            return near
        for i in range(len(lines) - 1, -1, -1):
            if lines[i] == text:
                return i
        return None
