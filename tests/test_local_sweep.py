"""Local sweeps (cockpit.launch.local.sweep): trials side by side on disjoint GPU sets, or a few at a time on
CPU, each a real torchrun + gloo run of the demo with its own run directory."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers import REPO
from test_runs_e2e import cockpit, env_for, only_run, wait_for

from cockpit.launch import procs
from cockpit.launch.local import sweep as local_sweep
from cockpit.launch.local.launcher import free_port
from cockpit.launch.site import LaunchError
from cockpit.run.store import read_status
from cockpit.spec.model import SpecError, load_spec

SMALL = ["--epochs", "1", "--steps-per-epoch", "10", "--hidden", "32", "--layers", "1", "--batch-size", "16"]


def write_job(tmp_path: Path, name: str, sweep: dict, args=SMALL, **fields) -> Path:
    job = {"name": name, "script": str(REPO / "jobs" / "demo.py"), "args": list(args), **fields, "sweep": sweep}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def trial_status(run_dir: Path, i: int):
    return read_status(run_dir / f"trial-{i}")


def test_three_trials_two_at_a_time_on_cpu(tmp_path):
    runs = tmp_path / "runs"
    lrs = ["0.1", "0.03", "0.01"]
    job = write_job(tmp_path, "sw", {"grid": {"lr": lrs}, "max_parallel": 2}, procs_per_node=1)  # 2 cores here
    r = cockpit(runs, "run", str(job), "-q", timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir, status = only_run(runs)
    assert status.state == "succeeded" and status.note == "sweep of 3 trials, 2 at a time (CPU): succeeded 3"
    t = [trial_status(run_dir, i) for i in range(3)]
    assert [s.state for s in t] == ["succeeded"] * 3 and all(sorted(s.ranks) == ["0"] for s in t)
    assert t[1].started < t[0].ended  # slots 0 and 1 side by side
    assert t[2].started >= t[0].ended  # trial 2 waited for slot 0
    for i, lr in enumerate(lrs):
        trial = run_dir / f"trial-{i}"
        assert (trial / "checkpoints" / "latest.pt").exists()
        assert json.loads((trial / "metrics" / "rank-0.jsonl").read_text().splitlines()[-1])["step"] == 10
        assert f"--lr {lr}" in (trial / "commands" / "node-0.sh").read_text()
        assert (run_dir / "logs" / f"agent.trial-{i}.log").read_text().startswith(f"cockpit: trial {i}: --lr {lr}")
    ports = {line for i in range(3) for line in (run_dir / f"trial-{i}/commands/node-0.sh").read_text().splitlines()
             if "--master-port=" in line}
    assert len(ports) == 3  # one rendezvous port each
    ps = cockpit(runs, "ps").stdout.splitlines()
    assert [line.split()[:5] for line in ps[2:]] == [["trial", str(i), "succeeded", "slot", str(i % 2)]
                                                       for i in range(3)]
    logs = cockpit(runs, "logs", str(run_dir / "trial-1"), "--rank", "0")
    assert logs.returncode == 0 and "[cockpit] finish rank=0 step=10 exit_code=0" in logs.stdout
    plot = cockpit(runs, "plot", str(run_dir), "--width", "100", "--height", "20")  # the trials on one chart
    assert plot.returncode == 0 and f"{run_dir.name}: loss per trial" in plot.stdout, plot.stderr
    assert all(f"trial {i} --lr {lr}" in plot.stdout for i, lr in enumerate(lrs)), plot.stdout
    heat = cockpit(runs, "plot", str(run_dir), "--metric", "heat", "--width", "60", "--height", "12")
    assert heat.returncode == 0 and "steps/s per trial over time" in heat.stdout
    rows = heat.stdout.splitlines()[1:4]
    assert [line[:2] for line in rows] == ["0 ", "1 ", "2 "]
    assert "·" not in "".join(rows)  # a finished trial is done, not stalled, while the others go on
    one = cockpit(runs, "plot", f"{run_dir.name}/trial-1", "--width", "80", "--height", "16")  # RUN/trial-I
    assert one.returncode == 0 and f"{run_dir.name}/trial-1" not in one.stderr and "rank 0" in one.stdout
    rank1 = cockpit(runs, "plot", str(run_dir), "--rank", "1")
    assert rank1.returncode == 2 and "have no rank 1 (each trial is a run of its own" in rank1.stderr


# A failing trial failing the sweep but not the others: test_sweep_rerun's sweep (3 trials, 1 fails) checks it.


def test_stop_ends_the_running_trial_and_cancels_the_waiting_one(tmp_path):
    runs = tmp_path / "runs"
    job = write_job(tmp_path, "swstop", {"grid": {"lr": ["0.1", "0.01"]}, "max_parallel": 1},
                    args=[*SMALL[:2], "--steps-per-epoch", "100000", *SMALL[4:]], procs_per_node=1)
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(job), "-q"], cwd=REPO, env=env_for(runs),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run_dir = wait_for(lambda: list((runs).glob("swstop-*")) and next(runs.glob("swstop-*")), 30, "the run")
        wait_for(lambda: "step=" in "".join(p.read_text() for p in (run_dir / "trial-0/logs").glob("rank-0.*.log")),
                 120, "trial 0 to train")
        t0 = time.monotonic()
        r = cockpit(runs, "stop", run_dir.name, "--grace", "5", timeout=90)
        assert r.returncode == 0, r.stdout + r.stderr
        print(f"stop took {time.monotonic() - t0:.1f} s")
        assert time.monotonic() - t0 < 30
    finally:
        out, err = proc.communicate(timeout=60)
    status = read_status(run_dir)
    assert status.state == "stopped" and "stopped 2" in status.note, out + err
    first, waiting = trial_status(run_dir, 0), trial_status(run_dir, 1)
    assert first.state == "stopped" and first.stop_requested
    assert waiting.state == "stopped" and waiting.started is None  # never started
    assert not (run_dir / "logs" / "agent.trial-1.log").exists()
    assert procs.run_pids(first.run_id) == [] and procs.run_pids(waiting.run_id) == []


def test_gpu_sets_are_disjoint_slots_of_the_pool(tmp_path):
    """Rendered only (no GPU here): gpus [0..3] split two per trial; the third trial reuses slot 0's set."""
    job = write_job(tmp_path, "gsw", {"grid": {"lr": ["1", "2", "3"]}, "gpus_per_trial": 2},
                    gpus=[0, 1, 2, 3], pg_backend="nccl")
    spec = load_spec(job)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    status = local_sweep.prepare(spec, str(job), run_dir, "gsw-x", (), free_port)
    assert [(n.trial.slot, n.trial.gpus) for n in status.nodes] == [(0, (0, 1)), (1, (2, 3)), (0, (0, 1))]
    assert status.note == "sweep of 3 trials, 2 at a time (GPUs 0,1 | 2,3)"
    for i, ids in enumerate(["0,1", "2,3", "0,1"]):
        script = (run_dir / f"trial-{i}/commands/node-0.sh").read_text()
        assert f"export CUDA_VISIBLE_DEVICES={ids}\n" in script and "--nproc-per-node=2" in script
    with pytest.raises(LaunchError, match="gpus_per_trial is 3 but the job has 2 GPUs"):
        local_sweep.slots(load_spec(write_job(tmp_path, "g2", {"grid": {"lr": ["1"]}, "gpus_per_trial": 3},
                                              gpus="all")), [0, 1])
    with pytest.raises(SpecError) as bad:
        load_spec(write_job(tmp_path, "g3", {"grid": {"lr": ["1"]}, "gpus_per_trial": 3}, gpus=[0, 1]))
    assert "sweep.gpus_per_trial: 3 GPUs per trial but the job has 2" in "\n".join(bad.value.lines())
