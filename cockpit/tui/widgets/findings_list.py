"""The run view's findings panel: hang findings, then the diagnosis or the live events, one option each
(rows from cockpit.tui.models.run_view.finding_rows; selecting one opens its evidence)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from cockpit.tui.models.run_view import FindingRow


class FindingsList(OptionList):
    def show(self, rows: list[FindingRow]) -> None:
        self.clear_options()
        self.add_options([Option(row.text, id=row.id, disabled=True) if row.disabled
                          else Option(Text(row.text, style=row.style), id=row.id) for row in rows])
