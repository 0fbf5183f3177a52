"""The run view of a sweep: its forecast line and the trial table (state, steps, last loss, forecast), sorted by
loss with `o`; from a finished sweep's files as the local sweep launcher leaves them."""

from __future__ import annotations

import json
from pathlib import Path

from tui.tuidata import until

from cockpit.insight.sweep_table import trial_rows
from cockpit.run.records import NodeRecord, Trial
from cockpit.run.store import RunStatus, create_run_dir, write_status
from cockpit.tui.app import CockpitApp
from cockpit.tui.models import run_view as runview
from cockpit.tui.models.context import Context
from cockpit.tui.models.fleet_feed import FixedFleet
from cockpit.tui.screens.run_view import RunViewScreen

T0 = 1_790_000_000.0
LOSSES = {0: 0.5, 1: 0.02, 2: None}  # trial 2 failed before its first metrics record


def make_sweep(runs: Path) -> Path:
    run_dir = create_run_dir(runs, "sw-20260101-000000-abcd")
    (run_dir / "job.yaml").write_text("name: sw\nscript: train.py\ntotal_steps: 20\nsweep:\n  grid: {lr: [1, 2, 3]}\n")
    sweep = RunStatus(run_id=run_dir.name, name="sw", launcher="local", job_file="/j/sw.yaml", hosts=[],
                      world_size=None, state="failed", created=T0, started=T0, ended=T0 + 60, exit_code=1)
    for i, loss in LOSSES.items():
        tdir = run_dir / f"trial-{i}"
        (tdir / "metrics").mkdir(parents=True)
        state = "failed" if loss is None else "succeeded"
        write_status(tdir, RunStatus(run_id=f"{run_dir.name}.trial-{i}", name="sw", launcher="local",
                                     job_file="/j/sw.yaml", hosts=["h"], world_size=1, state=state,
                                     created=T0, started=T0, ended=T0 + 20))
        with open(tdir / "metrics" / "rank-0.jsonl", "w") as f:
            for step in range(1, 21 if loss is not None else 1):
                f.write(json.dumps({"step": step, "loss": loss + 1 / step, "time": T0 + step}) + "\n")
        sweep.nodes.append(NodeRecord(f"trial-{i}", i, state=state, run_dir=str(tdir),
                                      trial=Trial(i, ("--lr", str(i + 1)), (), 0)))
    write_status(run_dir, sweep)
    return run_dir


def test_trial_cells_and_the_sweep_line(tmp_path):
    run_dir = make_sweep(tmp_path / "runs")
    from cockpit.run.store import read_status

    rows = trial_rows(run_dir, read_status(run_dir), now=T0 + 100)
    assert [runview.trial_cells(r)[:4] for r in rows] == [
        ("0", "succeeded", "20/20", "0.55"), ("1", "succeeded", "20/20", "0.07"), ("2", "failed", "-", "-")]
    assert runview.sweep_line(rows, "loss") == ("sweep: 3 trials (failed 1, succeeded 2); CPU-only; "
                                                "sorted by loss (o: sort)")


async def test_the_run_view_of_a_sweep_shows_its_trials_sortable_by_loss(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    runs = tmp_path / "runs"
    run_dir = make_sweep(runs)
    ctx = Context(runs_dir=runs, fleet=FixedFleet([], local_names=("localhost",)), base_dir=tmp_path,
                  config_path=tmp_path / "config" / "tui.yaml", partitions=lambda: [], runs_every=3600,
                  clock=lambda: T0 + 100)
    app = CockpitApp(ctx)
    async with app.run_test(size=(120, 30)) as pilot:
        app.push_screen(RunViewScreen(run_dir))
        await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen.query("#trials"),
                    what="the run view")
        view = app.screen
        table = view.query_one("#trials")

        def order() -> list[str]:
            return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]

        await until(pilot, lambda: table.row_count == 3, what="the trial table")
        assert table.has_class("-sweep") and table.display and order() == ["0", "1", "2"]
        assert str(view.query_one("#run-forecast").content).startswith("sweep: 3 trials (failed 1, succeeded 2)")
        await pilot.press("o")
        await until(pilot, lambda: order() == ["1", "0", "2"], what="the trials sorted by loss")
        assert "sorted by loss" in str(view.query_one("#run-forecast").content)


async def test_a_plain_run_without_metrics_yet_is_not_called_a_sweep(tmp_path):
    """Issue 33 item 8: a just-launched plain run's side panel said "a sweep: c charts its trials": its forecast
    sets an empty trial table, and the panel took any table for a sweep's."""
    from cockpit.tui.messages import MetricsRead

    runs = tmp_path / "runs"
    runs.mkdir(mode=0o700)
    run_id = "plain-20260924-000000-ab02"
    create_run_dir(runs, run_id)
    write_status(runs / run_id, RunStatus(run_id=run_id, name="plain", launcher="local", job_file="/j.yaml",
                                          hosts=["localhost"], world_size=2, state="running", created=T0,
                                          started=T0 + 1))
    ctx = Context(runs_dir=runs, fleet=FixedFleet([], local_names=("localhost",)), base_dir=tmp_path,
                  config_path=tmp_path / "config" / "tui.yaml", partitions=lambda: [], runs_every=3600,
                  clock=lambda: T0 + 5)
    app = CockpitApp(ctx)
    async with app.run_test(size=(120, 30)) as pilot:
        app.push_screen(RunViewScreen(runs / run_id))
        await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen.query("#run-forecast")
                    and str(app.screen.query_one("#run-forecast").content), what="the run's forecast")
        view = app.screen
        assert not view.query_one("#trials").has_class("-sweep")
        view.on_metrics_read(MetricsRead(None))  # what the next second's metrics read posts for a run with none
        assert str(view.query_one("#loss-label").content) == "metrics: none yet"
