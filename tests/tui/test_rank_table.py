"""The run view's rank table at thousands of ranks (issue 32): past LAZY_FROM rows only the rows on screen get
their cells when they change, the others once scrolled to (4,096 rows' cells changing every second were 16,000
update_cell calls a second, each clearing the table's render cache); at fewer rows every row gets them at once."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets.data_table import ColumnKey
from tui.tuidata import until

from cockpit.tui.models.rank_table import SIDE_WIDTH, SOURCE_MAX, source_label, source_width, table_width
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


def test_source_fits_its_longest_label_and_cuts_a_long_host_keeping_its_rank():
    """Issue 33: SOURCE was 9 wide, ``node0:agent`` showed as ``node0:age``."""
    assert source_width(["vm:0", "vm:agent"]) == 9 and source_width(["node0:0", "node0:agent"]) == 11
    assert source_width([]) == 9  # a grouped table (rank_groups) fits none
    assert source_width(["gpu-st-p4d-24xlarge-117:agent"]) == SOURCE_MAX
    assert source_label("node0:agent", 11) == "node0:agent"
    assert source_label("gpu-st-p4d-24xlarge-117:agent", SOURCE_MAX) == "gpu-st-p4d-…:agent"
    assert source_label("gpu-st-p4d-24xlarge-117:12", SOURCE_MAX) == "gpu-st-p4d-24x…:12"
    assert SOURCE_MAX == 18 and source_label("a-very-long-hostname:agent", 6) == "a-ver…"  # no room for a host
    assert table_width(9) + 1 == SIDE_WIDTH == 38  # app.tcss's side panel


async def test_the_table_is_as_wide_as_its_labels_need():
    app = Table()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(RankTable)
        table.rebuild([("node0", 0), ("node0", 1), ("node0", "agent")])
        await pilot.pause()
        assert [str(table.get_row_at(r)[0]) for r in (1, 3)] == ["node0:0", "node0:agent"]
        assert table.columns[ColumnKey("src")].width == 11 and table.width_needed == SIDE_WIDTH - 1 + 2
        assert table.virtual_size.width == table.width_needed
        table.rebuild([("vm", 0), ("vm", "agent")])  # narrower again
        await pilot.pause()
        assert table.columns[ColumnKey("src")].width == 9 and table.width_needed == SIDE_WIDTH - 1
