"""The rank table's keys, for the run view (issue 32): `g` asks for a rank and goes to it (its group opened, its
log shown), `G` folds the table by the next grouping (state, node, what the ranks are doing). Past
cockpit.tui.models.rank_groups.FLAT_UP_TO ranks the table shows groups: any rank is one `g` away."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, Label, Static

from cockpit.tui.models.rank_groups import FLAT_UP_TO, parse_rank
from cockpit.tui.screens.base import CockpitScreen
from cockpit.tui.screens.dialogs import Dialog
from cockpit.tui.widgets.rank_groups import RankGroupTable


class GoToRank(Dialog[tuple | None]):
    """Which rank: a number, or host:agent; dismisses with its source, None on escape."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, sources: list[tuple]) -> None:
        super().__init__()
        self.sources = sources

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Go to rank", classes="dialog-title")
            yield Input(placeholder="a rank number, or host:agent", id="rank", compact=True)
            yield Static("", id="rank-note", classes="dialog-note", markup=False)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        found = parse_rank(event.value, self.sources)
        if isinstance(found, str):
            self.query_one("#rank-note", Static).update(found)
            return
        self.dismiss(found)

    def action_cancel(self) -> None:
        self.dismiss(None)


class RunRanks(CockpitScreen):
    """Mixed into the run view (which has the table, ``stats`` and ``set_view``)."""

    BINDINGS = [Binding("g", "goto_rank", "Go to rank", show=False),
                Binding("G", "group_by", "Group ranks by", show=False)]

    stats: dict

    @work(exclusive=True, group="goto", exit_on_error=False)
    async def action_goto_rank(self) -> None:
        source = await self.app.push_screen_wait(GoToRank(list(self.stats)))
        if source is None:
            return
        self.query_one(RankGroupTable).reveal(source)
        self.set_view(source)  # type: ignore[attr-defined]

    def action_group_by(self) -> None:
        table = self.query_one(RankGroupTable)
        by = table.regroup()
        if table.grouped:
            self.notify(f"ranks grouped by {by}", timeout=3)
        else:
            self.notify(f"ranks grouped by {by} past {FLAT_UP_TO} ranks; this run's are one row each", timeout=3)
