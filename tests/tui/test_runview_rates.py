"""Issue 33 item 8: the run view said two step rates for one rank, the rank table's `/s` (the watchdog's, over
its last 10 s, in status.json's progress) and the side panel's (its series' latest interval). Where both count
the same thing the panel now says the table's figure; where they do not (a script's printed steps, the table
counting collectives), the panel says what the table counts."""

from __future__ import annotations

import json
from pathlib import Path

from tui.tuidata import until

from cockpit.plot.series import BEATS, METRICS, RankSeries
from cockpit.run.progress import RankProgress
from cockpit.run.store import RunStatus, create_run_dir, write_status
from cockpit.tui.app import CockpitApp
from cockpit.tui.models.context import Context
from cockpit.tui.models.fleet_feed import FixedFleet
from cockpit.tui.models.rank_table import side_rate
from cockpit.tui.screens.run_view import RunViewScreen

T0 = 1_790_000_000.0


def running_run(runs: Path, progress: dict[str, RankProgress]) -> Path:
    """A running 2-rank run: rank 0 wrote cockpit's metrics (1 step a second), rank 1 none; the watchdog's
    progress as given."""
    run_id = "rates-20260924-000000-ab02"
    create_run_dir(runs, run_id)
    run_dir = runs / run_id
    for rank in (0, 1):
        (run_dir / "logs" / f"rank-{rank}.localhost.log").write_text(f"rank {rank} up\n")
    (run_dir / "metrics").mkdir()
    with open(run_dir / "metrics" / "rank-0.jsonl", "w") as f:
        for step in range(1, 31):
            f.write(json.dumps({"step": step, "loss": 1 / step, "time": T0 + step}) + "\n")
    write_status(run_dir, RunStatus(run_id=run_id, name="rates", launcher="local", job_file="/j.yaml",
                                    hosts=["localhost"], world_size=2, state="running", created=T0,
                                    started=T0 + 1, progress=progress))
    return run_dir


async def test_the_side_panel_says_the_rank_tables_rate(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir(mode=0o700)
    progress = {"0": RankProgress("localhost", "running", step=30, step_source="metrics", rate=3.1),
                "1": RankProgress("localhost", "running", step=120, step_source="syncs", rate=12.0)}
    run_dir = running_run(runs, progress)
    ctx = Context(runs_dir=runs, fleet=FixedFleet([], local_names=("localhost",)), base_dir=tmp_path,
                  config_path=tmp_path / "config" / "tui.yaml", partitions=lambda: [], runs_every=3600,
                  clock=lambda: T0 + 31)
    app = CockpitApp(ctx)
    async with app.run_test(size=(120, 30)) as pilot:
        app.push_screen(RunViewScreen(run_dir))
        await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen.status is not None
                    and str(app.screen.query_one("#sps-label").content), what="the side panel's rate")
        view = app.screen
        ranks = view.query_one("#ranks")
        await until(pilot, lambda: ranks.row_count >= 2 and str(ranks.get_row_at(1)[2]), what="rank 0's row")
        table = str(ranks.get_row_at(1)[2])
        await until(pilot, lambda: str(view.query_one("#sps-label").content).startswith("steps/s 3"),
                    what="the panel's rate")
        assert table == "3.10" and str(view.query_one("#sps-label").content) == f"steps/s {table}"
        # the watchdog's next figure: the panel says it with the table, not a metrics read later (read once a
        # second, it said the status before the table's; here no read comes at all)
        view.read_metrics = lambda: None
        progress["0"] = RankProgress("localhost", "running", step=34, step_source="metrics", rate=4.2)
        status = view.status
        write_status(run_dir, RunStatus(run_id=status.run_id, name="rates", launcher="local", job_file="/j.yaml",
                                        hosts=["localhost"], world_size=2, state="running", created=T0,
                                        started=T0 + 1, progress=progress))
        await until(pilot, lambda: str(ranks.get_row_at(1)[2]) == "4.20", what="the table's new rate", timeout=20)
        assert str(view.query_one("#sps-label").content) == "steps/s 4.20"


def test_a_rate_the_table_counts_otherwise_is_said_for_what_it_is():
    series = RankSeries(0, (1, 2, 3), (T0, T0 + 1, T0 + 2), (1.0, 0.5, 0.3), METRICS)
    syncs = RankProgress("h", "running", step=40, step_source="syncs", rate=20.0)
    steps = RankProgress("h", "running", step=3, step_source="metrics", rate=0.9)
    # a script's printed steps (origin "printed") while the watchdog counts its collectives
    assert side_rate(series, "printed", syncs, False, 36) == "steps/s 1 (table /s: collectives)"
    assert side_rate(series, "metrics", steps, False, 36) == "steps/s 0.90"  # the table's own figure
    stalled = RankProgress("h", "running", step=3, step_source="metrics", rate=None)
    assert side_rate(series, "metrics", stalled, False, 36) == "steps/s -"  # the table says none: so does the panel
    assert side_rate(series, "metrics", stalled, True, 36) == "steps/s 1"  # an ended run: its last interval
    beats = RankSeries(0, (10, 30), (T0, T0 + 1), (None, None), BEATS, (0.0, 0.1))
    assert side_rate(beats, BEATS, syncs, False, 36) == "collectives/s 20.0"
    assert side_rate(series, "metrics", None, False, 36) == "steps/s 1"  # no watchdog figure: the series'
