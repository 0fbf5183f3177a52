"""The run view's rank table at thousands of ranks (issue 32): past LAZY_FROM rows only the rows on screen get
their cells when they change, the others once scrolled to (4,096 rows' cells changing every second were 16,000
update_cell calls a second, each clearing the table's render cache); at fewer rows every row gets them at once."""

from __future__ import annotations

from textual.app import App, ComposeResult
from tui.tuidata import until

from cockpit.tui.widgets.rank_table import LAZY_FROM, RankTable


class Table(App):
    def compose(self) -> ComposeResult:
        yield RankTable()


def cells(table: RankTable, row: int) -> list[str]:
    return [str(c) for c in table.get_row_at(row)[1:]]


async def show_all(ranks: int) -> tuple[list[str], list[str], list[str]]:
    """(rank 0's cells, the last rank's before scrolling to it, after), every row shown step 7."""
    app = Table()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(RankTable)
        sources = [("n", r) for r in range(ranks)]
        table.rebuild(sources)
        for source in sources:
            table.show(source, ("7", "1.00", "0s", ""))
        first, before = cells(table, 1), cells(table, ranks)
        table.scroll_end(animate=False)
        await until(pilot, lambda: cells(table, ranks)[0] == "7", what="the last row's cells once scrolled to")
        return first, before, cells(table, ranks)


async def test_past_lazy_from_rows_off_screen_get_their_cells_when_scrolled_to():
    first, before, after = await show_all(LAZY_FROM + 44)
    assert first == ["7", "1.00", "0s", ""] and before == ["", "", "", ""] and after == first


async def test_below_lazy_from_every_row_gets_its_cells_at_once():
    first, before, after = await show_all(40)
    assert first == before == after == ["7", "1.00", "0s", ""]


async def test_rows_a_taller_table_shows_get_their_waiting_cells():
    app = Table()
    async with app.run_test(size=(60, 30)) as pilot:
        table = app.query_one(RankTable)
        table.styles.height = 4
        await pilot.pause()
        sources = [("n", r) for r in range(LAZY_FROM + 1)]
        table.rebuild(sources)
        for source in sources:
            table.show(source, ("7", "1.00", "0s", ""))
        assert cells(table, 12) == ["", "", "", ""]
        table.styles.height = 20
        await until(pilot, lambda: cells(table, 12)[0] == "7", what="row 12's cells once the table shows it")
        assert cells(table, 60) == ["", "", "", ""]  # still off screen
