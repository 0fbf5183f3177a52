"""A sweep of a script that prints its progress (no metrics file of cockpit's): `cockpit sweep show` has each
trial's steps and last loss, and `cockpit plot` draws the trials' losses on one chart, from the trials' logs.
The sweep directory is the layout a local sweep writes (tests/tui/chartdata.py), its trials' logs printed
text instead of metrics files."""

from __future__ import annotations

import json
import shutil

from test_runs_e2e import cockpit
from tui.chartdata import TRIAL_LR, make_charts_sweep


def test_a_sweeps_trials_from_their_printed_lines(tmp_path):
    runs = tmp_path / "runs"
    run_dir = make_charts_sweep(runs)
    for i in range(len(TRIAL_LR)):
        tdir = run_dir / f"trial-{i}"
        shutil.rmtree(tdir / "metrics")
        (tdir / "logs").mkdir(exist_ok=True)
        steps = 10 * (i + 1)  # trial i stopped after 10 * (i + 1) steps
        (tdir / "logs" / "rank-0.node0.log").write_text(
            "".join(f"Epoch 0 | step {s} | loss: {1.0 / (s + i):.4f}\n" for s in range(1, steps + 1)))
    r = cockpit(runs, "sweep", "show", run_dir.name, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    trials = json.loads(r.stdout)["trials"]
    assert [(t["steps"], t["last_loss"]) for t in trials] == [(10, round(1 / 10, 4)), (20, round(1 / 21, 4)),
                                                              (30, round(1 / 32, 4))]
    assert [t["forecast"]["steps_done"] for t in trials] == [10, 20, 30]
    chart = cockpit(runs, "plot", run_dir.name, "--width", "80", "--height", "20")
    assert chart.returncode == 0 and all(f"--lr {lr}" in chart.stdout for lr in TRIAL_LR), chart.stdout
