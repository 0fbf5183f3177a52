"""The run view's rank table by groups (issue 32): up to FLAT_UP_TO sources it is the flat RankTable, a row per
source; past it, a row per group (cockpit.tui.models.rank_groups: by state, node or what the ranks are doing,
the outliers first), enter on a group's row shows its ranks under it (and hides them again), and ``regroup``
moves to the next grouping. Any one rank is ``reveal``-ed: its group opened, the cursor on it (the run view's
`g` asks which).

The ranks' rows of an open group fill their cells as the flat table's do past LAZY_FROM: the rows on screen at
once, the others when scrolled to. Groups are worked out again at most once a refresh, and the rows rebuilt
only when who is in which group changed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from cockpit.tui.models.log_store import MERGED
from cockpit.tui.models.rank_groups import FLAT_UP_TO, GROUPINGS, Group, RankInfo, group_cells, groups, rows
from cockpit.tui.models.rank_table import COLUMNS, source_order
from cockpit.tui.widgets.rank_table import ALL, RankTable

SLICE = 256  # sources shown per turn of the event loop past FLAT_UP_TO


class RankGroupTable(RankTable):
    def __init__(self, **kwargs) -> None:
        self.grouped = False
        self.by = GROUPINGS[0]
        self._infos: dict[tuple, RankInfo] = {}
        self._latest: dict[tuple, tuple] = {}  # every source's cells, shown or not
        self._expanded: set[str] = set()
        self._groups: list[Group] = []
        self._keys: list[str] = []  # the rows after "all ranks", by key
        self._items: list[Group | tuple] = []  # what each of those rows stands for: a Group or a source
        self._by_key: dict[str, tuple] = {}
        self._shown_heads: dict[str, tuple] = {}
        self._regroup_due = False
        self._moved = True  # a source's group or severity changed since: the groups are worked out again
        self._last_view: tuple | None = MERGED
        self._todo: list[tuple[tuple, Any]] = []  # show_rows's sources still to show, a slice at a time
        self._row_of: Callable[[tuple, Any], tuple[tuple, RankInfo]] | None = None
        self._info_of: Callable[[tuple, Any], RankInfo] | None = None
        self._inputs: dict[tuple, Any] = {}  # show_rows's input for each source without a row: its cells when shown
        self._slicing = False
        self._pass_moved = False  # a source's info changed in the pass under way: regroup once it is done
        super().__init__(**kwargs)

    # --- the run view's calls ----------------------------------------------------------------------------------
    def rebuild(self, sources) -> None:
        sources = list(sources)
        self.grouped = len(sources) > FLAT_UP_TO
        if not self.grouped:
            super().rebuild(sources)
            return
        self._sources = sorted(sources, key=source_order)
        self.fit_sources(())  # groups: the group's name in SOURCE's default width (group_cells), its ranks cut to it
        self._by_key = {repr(s): s for s in self._sources}
        self._keys = []  # every row again
        self._moved = True
        self._regroup()

    def show(self, source: tuple, cells: tuple, info: RankInfo | None = None) -> None:
        if not self.grouped:
            super().show(source, cells)
            return
        self._latest[source] = cells
        self._inputs.pop(source, None)
        if info is not None:
            self._take_info(source, info)
        if source in self._row:
            super().show(source, cells)

    def _take_info(self, source: tuple, info: RankInfo) -> None:
        old = self._infos.get(source)
        if old == info:
            return
        self._infos[source] = info
        # what a group depends on (the cheap test first: 4,096 ranks step every second)
        if old is None or (old.flag, old.exit_code, old.doing) != (info.flag, info.exit_code, info.doing):
            self._moved = True  # else only the group's cells change (steps, ages): no regrouping
        if self._slicing:
            self._pass_moved = True  # once, when the pass is done: not after each of its slices
        else:
            self._schedule()

    def show_rows(self, items: list[tuple[tuple, Any]], row: Callable[[tuple, Any], tuple[tuple, RankInfo]],
                  info: Callable[[tuple, Any], RankInfo] | None = None) -> None:
        """``show`` each (source, stats) of ``items`` with ``row``'s (cells, info) for it. Up to FLAT_UP_TO at
        once; past it SLICE sources per turn of the event loop, so that a key waits for one slice, not for
        4,096 rows' cells (~15-35 ms a pass, twice a second), and the groups are worked out once the pass is
        done. With ``info`` (the info alone, cheaper), a source without a row (its group closed) gets only
        that; its cells are made from its input when its row is shown. A new call while a pass is under way
        replaces what is left of it."""
        if not self.grouped:
            for source, stats in items:
                self.show(source, *row(source, stats))
            return
        self._todo, self._row_of, self._info_of = items, row, info
        if not self._slicing:
            self._slicing = True
            self.run_worker(self._slices(), group="rank-pass")

    async def _slices(self) -> None:
        """show_rows's pass, SLICE sources at a time, the event loop handed over between two. Not a callback
        posting the next one: textual's message loop takes a message already queued without handing the loop
        over, so the 16 slices of 4,096 ranks ran as one 25-45 ms step, and a key pressed meanwhile waited for
        all of them (issue 32)."""
        try:
            while self._todo:
                self._next_slice()
                await asyncio.sleep(0)
        finally:
            self._slicing = False
        if self._pass_moved:
            self._pass_moved = False
            self._schedule()

    def _next_slice(self) -> None:
        chunk, self._todo = self._todo[:SLICE], self._todo[SLICE:]
        row, info, shown = self._row_of, self._info_of, self._row
        assert row is not None  # show_rows set it before the first slice
        for source, stats in chunk:
            if info is None or source in shown:
                self.show(source, *row(source, stats))
            else:
                self._inputs[source] = stats
                self._take_info(source, info(source, stats))

    def select(self, view: tuple | None) -> None:
        self._last_view = view
        if not self.grouped:
            super().select(view)
            return
        want = ALL if view is MERGED else repr(view)
        if want == ALL or want in self._keys:
            self.move_cursor(row=0 if want == ALL else self._keys.index(want) + 1, animate=False)

    def view_of(self, key: str | None) -> tuple | None:
        if not self.grouped:
            view = super().view_of(key)
        elif key == ALL:
            view = MERGED
        else:  # a group's row: the log stays on what it shows
            view = self._by_key.get(key or "", self._last_view)
        self._last_view = view
        return view

    def reveal(self, source: tuple) -> None:
        """Open ``source``'s group and put the cursor on its row."""
        if self.grouped:
            group = next((g for g in self._groups if source in g.sources), None)
            if group is not None and group.key not in self._expanded:
                self._expanded.add(group.key)
                self._regroup()
        self.select(source)

    def regroup(self) -> str:
        """Fold by the next grouping (GROUPINGS); its name."""
        self.by = GROUPINGS[(GROUPINGS.index(self.by) + 1) % len(GROUPINGS)]
        self._expanded.clear()
        self._moved = True
        if self.grouped:
            self._keys = []
            self._regroup()
        return self.by

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value if event.row_key is not None else None
        if self.grouped and key is not None and key.startswith("g:"):
            event.stop()
            self._expanded.symmetric_difference_update({key})
            self._regroup()

    # --- the groups --------------------------------------------------------------------------------------------
    def _schedule(self) -> None:
        if not self._regroup_due:
            self._regroup_due = True
            self.call_after_refresh(self._regroup)

    def _regroup(self) -> None:
        self._regroup_due = False
        if self._moved or not self._groups:
            self._moved = False
            self._groups = groups(self._sources, self._infos, self.by)
        items = rows(self._groups, self._expanded)
        keys = [key for key, _ in items]
        if keys != self._keys:
            self._lay_out(keys, [item for _, item in items])
        for g in self._groups:
            cells = group_cells(g, self._infos, g.key in self._expanded)
            if self._shown_heads.get(g.key) != cells:
                self._shown_heads[g.key] = cells
                for (column, _, _), value in zip(COLUMNS, cells, strict=True):
                    self.update_cell(g.key, column, value)

    def _lay_out(self, keys: list[str], items: list[Group | tuple]) -> None:
        """The rows again (who is in which group changed, or a group opened): the cursor stays on its row."""
        at = self.cursor_row
        here = ALL if at <= 0 or at > len(self._keys) else self._keys[at - 1]
        self.clear()
        self.columns[ColumnKey("src")].label = Text(f"BY {self.by.upper()}")
        self._cells.clear()
        self._waiting.clear()
        self._shown_heads.clear()
        self._add_all_row()
        self._keys, self._items = keys, items
        self._row = {}
        blank = [""] * (len(COLUMNS) - 1)
        for i, (key, item) in enumerate(zip(keys, items, strict=True)):
            if isinstance(item, Group):
                self.add_row("", *blank, key=key)
                continue
            self._row[item] = i + 1
            name = self.source_text(item)
            self.add_row(" " + name if len(name) < self.source_width else name, *blank, key=key)
            # a source whose cells were not made since (only its info: show_rows) gets them once on screen
            self._waiting[item] = () if item in self._inputs else self._latest.get(item, tuple(blank))
        self.move_cursor(row=self._keys.index(here) + 1 if here in self._keys else 0, animate=False)
        self._flush()

    def _cells_of(self, source: tuple) -> tuple | None:
        """The newest cells of ``source``: made now from show_rows's input where only its info was taken since."""
        if source in self._inputs and self._row_of is not None:
            self._latest[source] = self._row_of(source, self._inputs.pop(source))[0]
        return self._latest.get(source)

    def _flush(self) -> None:
        if not self.grouped:
            super()._flush()
            return
        top = int(self.scroll_y)
        for item in self._items[max(0, top - 2):top + self.size.height]:
            if isinstance(item, tuple) and item in self._waiting:
                cells = self._waiting.pop(item)
                self._put(item, cells or self._cells_of(item) or ("",) * (len(COLUMNS) - 1))

    def _on_screen(self, source: tuple) -> bool:
        if not self.grouped:
            return super()._on_screen(source)
        row = self._row.get(source)
        top = int(self.scroll_y)
        return row is not None and top - 1 <= row <= top + self.size.height
