"""The charts screen on a run of 96 ranks on 12 nodes (issue 32): past 64 ranks the rate chart is the median
with the p10-p90 band and the straggler's own line, the heat map a row per node, and `n` drills down to one
node's ranks, the flagged rank's node first."""

from __future__ import annotations

import json
import time

from tui.tuidata import until

from cockpit.run.progress import RankProgress
from cockpit.run.store import RunStatus, create_run_dir, write_status
from cockpit.tui.app import CockpitApp
from cockpit.tui.models import charts as chartsview
from cockpit.tui.screens.charts import ChartsScreen

SLOW = 50  # on h6, stepping every 2 s where the others step every 1 s
HOSTS = [f"h{k:02d}" for k in range(12)]


def wide_run(runs):
    """A live run 41 s old: its 40 s of records end now (not a stall)."""
    t0 = time.time() - 41
    run_id = "wide-20260924-000000-ab96"
    create_run_dir(runs, run_id)
    run_dir = runs / run_id
    (run_dir / "metrics").mkdir()
    for rank in range(96):
        host = HOSTS[rank // 8]
        (run_dir / "logs" / f"rank-{rank}.{host}.log").write_text("up\n")
        every = 2.0 if rank == SLOW else 1.0
        with open(run_dir / "metrics" / f"rank-{rank}.jsonl", "w") as f:
            for step in range(1, int(40 / every) + 1):
                t = t0 + step * every + (rank % 7) * 0.01
                f.write(json.dumps({"step": step, "loss": 1.0 / step, "time": t}) + "\n")
    progress = {str(r): RankProgress(HOSTS[r // 8], "running", step=40, flag="straggler" if r == SLOW else None)
                for r in range(96)}
    write_status(run_dir, RunStatus(run_id=run_id, name="wide", launcher="local", job_file="/j.yaml", hosts=HOSTS,
                                    world_size=96, state="running", created=t0, started=t0, progress=progress))
    return run_dir


async def test_96_ranks_fold_into_percentiles_and_nodes_with_a_drill_down(ctx):
    ctx.runs_dir.mkdir(mode=0o700)
    run_dir = wide_run(ctx.runs_dir)
    app = CockpitApp(ctx)
    async with app.run_test(size=(120, 36)) as pilot:
        app.push_screen(ChartsScreen(run_dir, metric="rate"))
        await until(pilot, lambda: isinstance(app.screen, ChartsScreen) and app.screen.shown is not None,
                    what="the rate chart")
        screen = app.screen
        labels = [line.label for line in screen.shown[2][0].lines]
        assert labels == ["p90 of 96", "p50 of 96", "p10", f"rank {SLOW} (outlier)"]
        await pilot.press("m")
        await until(pilot, lambda: screen.shown[0] == "heat", what="the heat map")
        heat = screen.shown[2][0].heat
        assert heat.labels == tuple(HOSTS) and heat.who == "node"
        await pilot.press("n")  # the straggler's node first
        await until(pilot, lambda: screen.shown[3] == "h06", what="node h06's heat map")
        assert screen.shown[2][0].heat.labels == tuple(str(r) for r in range(48, 56))
        assert "node h06's ranks" in str(screen.query_one("#charts-title").content)
        await pilot.press("n")
        await until(pilot, lambda: screen.shown[3] == "h00", what="then the nodes in order")
        await pilot.press("a")
        await until(pilot, lambda: screen.shown[3] is None and screen.shown[2][0].heat.labels == tuple(HOSTS),
                    what="every node again")


def test_the_node_pick_cycles_flagged_nodes_first_then_all():
    hosts = {r: HOSTS[r // 8] for r in range(96)}
    status = RunStatus(run_id="r", name="r", launcher="local", job_file="/j", hosts=HOSTS, world_size=96,
                       progress={"90": RankProgress("h11", "running", flag="stalled")})
    order = chartsview.node_order(hosts, status)
    assert order[:3] == ["h11", "h00", "h01"] and len(order) == 12
    assert chartsview.next_node(None, order) == "h11"
    assert chartsview.next_node("h10", order) is None  # the last: all again
    assert chartsview.next_node("gone", order) == "h11"
