"""The run view's rank table: an "all ranks" row, then a row per source (rank or torchrun agent) in rank
order; the cells come from cockpit.tui.models.rank_table. Columns have fixed widths: rows arrive one source at a
time, and the side panel must not jump (nor snapshots vary). SOURCE's is fitted to the sources' labels at each
rebuild (fit_sources), and the run view makes its panel that wide."""

from __future__ import annotations

from collections.abc import Iterable

from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from cockpit.tui.models.log_store import MERGED, label
from cockpit.tui.models.rank_table import COLUMNS, source_label, source_order, source_width, table_width

ALL = "all"  # the key of the "all ranks" row (the merged view)
# sources above which only the rows on screen get their cells at once, the others when scrolled to: 4,096 rows'
# cells changing every second were 16,000 update_cell calls a second, each clearing the table's render cache
LAZY_FROM = 256


class RankTable(DataTable):
    def __init__(self, **kwargs) -> None:
        self._sources: list[tuple] = []  # the rows after "all ranks", in order
        self._cells: dict[tuple, tuple] = {}  # the cells shown in each source's row
        self._row: dict[tuple, int] = {}  # each source's row (0: "all ranks")
        self._waiting: dict[tuple, tuple] = {}  # cells of rows off screen, put in when scrolled to (LAZY_FROM)
        self.source_width = COLUMNS[0][2]  # SOURCE's, fitted to the sources' labels (fit_sources)
        super().__init__(cursor_type="row", show_header=True, **kwargs)

    def on_mount(self) -> None:
        for key, title, width in COLUMNS:
            self.add_column(title, key=key, width=width)
        self._add_all_row()

    @property
    def width_needed(self) -> int:
        """The cells the table's columns take: the side panel is made that wide (and its border)."""
        return table_width(self.source_width)

    def fit_sources(self, sources: Iterable[tuple]) -> None:
        """SOURCE as wide as the longest label of ``sources`` needs (at most SOURCE_MAX); call before adding
        their rows. The screen widens the panel to ``width_needed``."""
        self.source_width = source_width(label(s)[1:-1] for s in sources)
        column = self.columns.get(ColumnKey(COLUMNS[0][0]))
        if column is not None and column.width != self.source_width:
            column.width = self.source_width
            self._require_update_dimensions = True

    def source_text(self, source: tuple) -> str:
        """The SOURCE cell of ``source``'s row."""
        return source_label(label(source)[1:-1], self.source_width)

    def _add_all_row(self) -> None:
        self.add_row("all ranks", *[""] * (len(COLUMNS) - 1), key=ALL)

    def rebuild(self, sources: Iterable[tuple]) -> None:
        """A row per source, cells blank until shown (the cursor goes back to the top: see select)."""
        self.clear()
        self._cells.clear()
        self._waiting.clear()
        self._add_all_row()
        self._sources = sorted(sources, key=source_order)
        self.fit_sources(self._sources)
        self._row = {source: i + 1 for i, source in enumerate(self._sources)}
        for source in self._sources:
            self.add_row(self.source_text(source), *[""] * (len(COLUMNS) - 1), key=repr(source))

    def show(self, source: tuple, cells: tuple) -> None:
        """Put ``cells`` in ``source``'s row, if they changed: every update_cell invalidates the whole
        table's render cache. Past LAZY_FROM rows, a row off screen gets them once scrolled to."""
        if self._waiting.get(source, self._cells.get(source)) == cells:  # 4,096 rows a second: the cheap case first
            return
        if len(self._sources) > LAZY_FROM and not self._on_screen(source):
            self._waiting[source] = cells
            return
        self._waiting.pop(source, None)
        self._put(source, cells)

    def _put(self, source: tuple, cells: tuple) -> None:
        try:
            for (key, _, _), value in zip(COLUMNS[1:], cells, strict=True):
                self.update_cell(repr(source), key, value)
        except KeyError:  # row not there yet: the next rebuild adds it
            return
        self._cells[source] = cells

    def _on_screen(self, source: tuple) -> bool:
        row = self._row.get(source)
        top = int(self.scroll_y)
        return row is not None and top - 1 <= row <= top + self.size.height

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._flush()

    def on_resize(self) -> None:
        self._flush()  # the rows a first show found off screen (no size yet), or that a taller table shows

    def _flush(self) -> None:
        """Put the waiting cells of the rows on screen (_on_screen's)."""
        top = int(self.scroll_y)
        for source in self._sources[max(0, top - 2):top + self.size.height]:
            if source in self._waiting:
                self._put(source, self._waiting.pop(source))

    def select(self, view: tuple | None) -> None:
        """Move the cursor to ``view``'s row (MERGED: "all ranks"), if the table has one."""
        keys = [ALL] + [repr(s) for s in self._sources]
        want = ALL if view is MERGED else repr(view)
        if want in keys:
            self.move_cursor(row=keys.index(want), animate=False)

    def view_of(self, key: str | None) -> tuple | None:
        """The view a row stands for (by its key)."""
        return MERGED if key == ALL else next((s for s in self._sources if repr(s) == key), MERGED)
