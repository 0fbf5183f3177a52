"""The Runs screen among hostile run directories (issue 27): a status.json nested 100,000 deep, one that is a
FIFO, one that is /dev/zero. Before, one such run emptied the list (RecursionError in the worker) or hung it;
now each is a row in state "unreadable" and the three good runs are listed as before."""

from __future__ import annotations

import os

from tui.tuidata import until

from cockpit.tui.app import CockpitApp
from cockpit.tui.screens.runs import RunsScreen


def plant(runs_dir) -> None:
    for name, make in (("nested-20260101-000000-aaaa", lambda p: p.write_text("[" * 100_000 + "]" * 100_000)),
                       ("fifo-20260101-000000-bbbb", os.mkfifo),
                       ("zero-20260101-000000-cccc", lambda p: p.symlink_to("/dev/zero"))):
        (runs_dir / name).mkdir(mode=0o700)
        make(runs_dir / name / "status.json")


async def test_hostile_runs_are_rows_and_the_others_stay(ctx, runs):
    plant(ctx.runs_dir)
    app = CockpitApp(ctx)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("f4")
        await until(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.runs, what="the runs list")
        table = app.screen.query_one("#runs-table")
        rows = {str(table.get_row_at(i)[0]): str(table.get_row_at(i)[1]) for i in range(table.row_count)}
        assert sorted(rows.values()) == ["failed", "stopped", "succeeded", "unreadable", "unreadable", "unreadable"]
        assert {name for name, state in rows.items() if state == "unreadable"} == {
            "nested-20260101-000000-aaaa", "fifo-20260101-000000-bbbb", "zero-20260101-000000-cccc"}
