"""The run view's rank table by groups (issue 32): past 64 ranks the table folds them by state, node or what
they are doing, the outliers' group on top, a group opens to its ranks, and any rank is one `g` away."""

from __future__ import annotations

import time

from textual.app import App, ComposeResult
from tui.tuidata import until

from cockpit.run.progress import RankProgress
from cockpit.run.store import read_status, write_status
from cockpit.tui.models.log_store import MERGED
from cockpit.tui.models.rank_groups import FLAT_UP_TO, RankInfo, groups, parse_rank
from cockpit.tui.widgets.rank_groups import RankGroupTable

HOSTS = [f"n{k:03d}" for k in range(512)]
SOURCES = [(HOSTS[r // 8], r) for r in range(4096)]
HEALTHY = RankInfo(step=100, rate=1.0, age=0.5, doing="all_reduce")


def infos(**odd: RankInfo) -> dict[tuple, RankInfo]:
    out = dict.fromkeys(SOURCES, HEALTHY)
    for rank, info in odd.items():
        out[SOURCES[int(rank[1:])]] = info
    return out


def test_a_stalled_rank_among_4096_is_a_group_of_its_own_on_top():
    got = infos(r3073=RankInfo(step=97, flag="culprit", doing=None), r12=RankInfo(step=99, rate=0.5, flag="straggler"))
    found = groups(SOURCES, got, "state")
    assert [(g.name, len(g.sources)) for g in found] == [("STUCK", 1), ("slow", 1), ("ok", 4094)]
    assert found[0].sources == (("n384", 3073),)


def test_by_node_the_outliers_node_first_then_the_nodes_in_order():
    found = groups(SOURCES, infos(r3073=RankInfo(flag="stalled"), r9=RankInfo(exit_code=1)), "node")
    assert [g.name for g in found[:4]] == ["n001", "n384", "n000", "n002"]  # failed, stalled (both worst) by rank
    assert len(found) == 512 and all(len(g.sources) == 8 for g in found)


def test_by_doing_two_collectives_stay_two_groups():
    found = groups(SOURCES, infos(r5=RankInfo(doing="broadcast"), r6=RankInfo(doing=None)), "doing")
    assert sorted((g.name, len(g.sources)) for g in found) == [("all_reduce", 4094), ("broadcast", 1),
                                                              ("computing", 1)]


def test_go_to_rank_reads_a_number_or_host_agent_and_says_what_is_wrong():
    sources = SOURCES[:16] + [("n000", "agent")]
    assert parse_rank(" 9 ", sources) == ("n001", 9)
    assert parse_rank("n000:agent", sources) == ("n000", "agent")
    assert parse_rank("n001:9", sources) == ("n001", 9)
    assert parse_rank("99", sources) == "no rank 99 in this run (ranks 0-15)"
    assert "not a rank" in parse_rank("x", sources)


class Table(App):
    def compose(self) -> ComposeResult:
        yield RankGroupTable()


def row_keys(table: RankGroupTable) -> list[str]:
    return [table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(table.row_count)]


def first_cells(table: RankGroupTable, row: int) -> list[str]:
    return [str(c) for c in table.get_row_at(row)]


async def test_the_table_folds_4096_ranks_opens_a_group_and_reveals_a_rank():
    app = Table()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(RankGroupTable)
        table.rebuild(SOURCES)
        got = infos(r3073=RankInfo(step=97, flag="culprit"))
        for source in SOURCES:
            table.show(source, ("100", "1.00", "0s", ""), got[source])
        await until(pilot, lambda: table.row_count == 3, what="all ranks + 2 groups")
        assert row_keys(table) == ["all", "g:state:STUCK", "g:state:ok"]
        assert first_cells(table, 1) == ["▸STUCK", "97", "", "-", "1"]
        assert first_cells(table, 2) == ["▸ok", "100", "1.00", "0s", "4095"]
        table.move_cursor(row=2)
        await pilot.press("enter")  # open the 4,095 ranks' group
        await until(pilot, lambda: table.row_count == 3 + 4095, what="the group's ranks")
        assert first_cells(table, 3) == [" n000:0", "100", "1.00", "0s", ""]
        assert table.cursor_row == 2 and table.view_of("g:state:ok") is MERGED
        table.reveal(("n384", 3073))  # its group opened, the cursor on it
        assert table.cursor_row == 2 and row_keys(table)[2] == repr(("n384", 3073))
        assert table.view_of(repr(("n384", 3073))) == ("n384", 3073)
        assert table.regroup() == "node"
        await until(pilot, lambda: table.row_count == 513, what="a row per node")
        assert row_keys(table)[1] == "g:node:n384" and first_cells(table, 1)[-1] == "8"


async def test_at_64_ranks_the_table_stays_flat():
    app = Table()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(RankGroupTable)
        table.rebuild(SOURCES[:FLAT_UP_TO])
        for source in SOURCES[:FLAT_UP_TO]:
            table.show(source, ("7", "1.00", "0s", ""), HEALTHY)
        await pilot.pause()
        assert not table.grouped and table.row_count == FLAT_UP_TO + 1
        assert first_cells(table, 1) == ["n000:0", "7", "1.00", "0s", ""]


async def test_the_run_view_folds_100_ranks_and_goes_to_one_by_g(tmp_path):
    """A running 100-rank run, rank 42 a straggler: its group leads the table; `g 57 enter` shows rank 57's
    log with the cursor on its row; `G` folds by node."""
    from cockpit.run.store import RunStatus, create_run_dir
    from cockpit.tui.app import CockpitApp
    from cockpit.tui.models.context import Context
    from cockpit.tui.models.fleet_feed import FixedFleet
    from cockpit.tui.screens.run_view import RunViewScreen

    runs = tmp_path / "runs"
    runs.mkdir(mode=0o700)
    run_id = "wide-20260924-000000-ab99"
    create_run_dir(runs, run_id)
    run_dir = runs / run_id
    hosts = [f"h{k}" for k in range(13)]
    for rank in range(100):
        (run_dir / "logs" / f"rank-{rank}.{hosts[rank // 8]}.log").write_text(f"rank {rank} says hello\n")
    progress = {str(r): RankProgress(hosts[r // 8], "running", step=50, step_source="metrics", rate=1.0,
                                     flag="straggler" if r == 42 else None) for r in range(100)}
    now = time.time()
    write_status(run_dir, RunStatus(run_id=run_id, name="wide", launcher="local", job_file="/j.yaml", hosts=hosts,
                                    world_size=100, state="running", created=now, started=now, progress=progress))
    ctx = Context(runs_dir=runs, fleet=FixedFleet([], local_names=("localhost",)), base_dir=tmp_path,
                  config_path=tmp_path / "config" / "tui.yaml", partitions=lambda: [], runs_every=3600)
    app = CockpitApp(ctx)
    async with app.run_test(size=(120, 30)) as pilot:
        app.push_screen(RunViewScreen(run_dir))
        await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen.query(RankGroupTable),
                    what="the run view")
        view = app.screen
        table = view.query_one(RankGroupTable)
        await until(pilot, lambda: table.grouped and row_keys(table)[1:] == ["g:state:slow", "g:state:ok"],
                    what="the straggler's group on top")
        assert first_cells(table, 1)[0] == "▸slow" and first_cells(table, 2)[-1] == "99"
        await pilot.press("g")
        await until(pilot, lambda: app.screen is not view, what="the go-to-rank dialog")
        await pilot.press("5", "7", "enter")
        await until(pilot, lambda: app.screen is view and view.view == ("h7", 57), what="rank 57's view")
        assert row_keys(table)[table.cursor_row] == repr(("h7", 57))
        await until(pilot, lambda: "rank 57 says hello" in "\n".join(view.query_one("#log").lines),
                    what="rank 57's log")
        await pilot.press("G")
        await until(pilot, lambda: row_keys(table)[1:3] == ["g:node:h5", "g:node:h0"], what="by node")
        assert read_status(run_dir).progress["42"].flag == "straggler"

        # the footer is told again (recomposed) when what it offers changed, not at every status: Stop, until the
        # run ended
        told = []
        view.refresh_bindings = lambda: told.append(view.check_action("stop", ()))  # type: ignore[method-assign]
        again = read_status(run_dir)
        again.progress["42"] = RankProgress("h5", "running", step=51, step_source="metrics", rate=1.0)
        write_status(run_dir, again)
        await until(pilot, lambda: view.status.progress["42"].step == 51, what="the next status")
        assert told == []
        ended = read_status(run_dir)
        ended.state, ended.ended = "succeeded", time.time()
        write_status(run_dir, ended)
        await until(pilot, lambda: told, what="the footer told once the run ended")
        assert told == [None]  # Stop no longer offered
