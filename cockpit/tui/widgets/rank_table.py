"""The run view's rank table: an "all ranks" row, then a row per source (rank or torchrun agent) in rank
order; the cells come from cockpit.tui.models.rank_table. Columns have fixed widths: rows arrive one source at a
time, and the side panel must not jump (nor snapshots vary)."""

from __future__ import annotations

from collections.abc import Iterable

from textual.widgets import DataTable

from cockpit.tui.models.log_store import MERGED, label
from cockpit.tui.models.rank_table import COLUMNS, source_order

ALL = "all"  # the key of the "all ranks" row (the merged view)


class RankTable(DataTable):
    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", show_header=True, **kwargs)
        self._sources: list[tuple] = []  # the rows after "all ranks", in order
        self._cells: dict[tuple, tuple] = {}  # the cells shown in each source's row

    def on_mount(self) -> None:
        for key, title, width in COLUMNS:
            self.add_column(title, key=key, width=width)
        self._add_all_row()

    def _add_all_row(self) -> None:
        self.add_row("all ranks", *[""] * (len(COLUMNS) - 1), key=ALL)

    def rebuild(self, sources: Iterable[tuple]) -> None:
        """A row per source, cells blank until shown (the cursor goes back to the top: see select)."""
        self.clear()
        self._cells.clear()
        self._add_all_row()
        self._sources = sorted(sources, key=source_order)
        for source in self._sources:
            self.add_row(label(source)[1:-1], *[""] * (len(COLUMNS) - 1), key=repr(source))

    def show(self, source: tuple, cells: tuple) -> None:
        """Put ``cells`` in ``source``'s row, if they changed: every update_cell invalidates the whole
        table's render cache."""
        if self._cells.get(source) == cells:
            return
        try:
            for (key, _, _), value in zip(COLUMNS[1:], cells, strict=True):
                self.update_cell(repr(source), key, value)
        except KeyError:  # row not there yet: the next rebuild adds it
            return
        self._cells[source] = cells

    def select(self, view: tuple | None) -> None:
        """Move the cursor to ``view``'s row (MERGED: "all ranks"), if the table has one."""
        keys = [ALL] + [repr(s) for s in self._sources]
        want = ALL if view is MERGED else repr(view)
        if want in keys:
            self.move_cursor(row=keys.index(want), animate=False)

    def view_of(self, key: str | None) -> tuple | None:
        """The view a row stands for (by its key)."""
        return MERGED if key == ALL else next((s for s in self._sources if repr(s) == key), MERGED)
