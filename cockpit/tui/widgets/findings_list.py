"""The run view's findings panel: hang findings, then the diagnosis or the live events, one option each
(rows from cockpit.tui.models.run_view.finding_rows; selecting one opens its evidence)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from cockpit.tui.models.run_view import FindingRow


class FindingsList(OptionList):
    def show(self, rows: list[FindingRow]) -> None:
        """The rows now; the highlighted one stays highlighted (the list is rebuilt on every live update: without
        this, an Enter just after one selected nothing)."""
        kept = self.get_option_at_index(self.highlighted).id if self.highlighted is not None else None
        self.clear_options()
        self.add_options([Option(row.text, id=row.id, disabled=True) if row.disabled
                          else Option(Text(row.text, style=row.style), id=row.id) for row in rows])
        at = next((i for i, row in enumerate(rows) if row.id == kept and not row.disabled), None)
        if at is not None:
            self.highlighted = at
