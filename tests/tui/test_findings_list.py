"""The run view's findings panel is rebuilt on every live update (a status change, live events, a diagnosis
that came in): the row the user highlighted stays highlighted, so Enter opens it whenever it is pressed. Before,
a rebuild between the highlight and the key cleared the highlight and the key did nothing
(tests/tui/test_hang_view.py waited 60 s for the evidence, under load)."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import OptionList

from cockpit.tui.models.run_view import FindingRow
from cockpit.tui.widgets.findings_list import FindingsList

ROWS = [FindingRow("STALL   rank 1 is stuck", "h0", "bold red"), FindingRow("live    rank 0 error: x", "e0")]


class Panel(App):
    def __init__(self) -> None:
        super().__init__()
        self.selected: list[str | None] = []

    def compose(self) -> ComposeResult:
        yield FindingsList()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.selected.append(event.option.id)


async def test_a_rebuild_keeps_the_highlighted_row_and_enter_opens_it():
    app = Panel()
    async with app.run_test() as pilot:
        panel = app.query_one(FindingsList)
        panel.show(ROWS)
        panel.focus()
        panel.highlighted = 1
        panel.show([FindingRow("STALL   rank 1 is stuck (now 9 s)", "h0", "bold red"), *ROWS[1:]])  # a live update
        assert panel.highlighted == 1
        await pilot.press("enter")
        assert app.selected == ["e0"]


async def test_a_row_that_went_away_or_is_disabled_is_not_highlighted():
    app = Panel()
    async with app.run_test():
        panel = app.query_one(FindingsList)
        panel.show(ROWS)
        panel.highlighted = 1
        panel.show([ROWS[0], FindingRow("diagnosis: no problems found", "e0", disabled=True)])
        assert panel.highlighted is None
        panel.highlighted = 0
        panel.show(ROWS[1:])  # h0 is gone
        assert panel.highlighted is None
