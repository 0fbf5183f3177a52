"""Stop signals, checkpoints and resume: a stopped-and-resumed run ends where an uninterrupted one does."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
import torch

ARGS = ["--epochs", "3", "--steps-per-epoch", "12", "--batch-size", "8"]
TOTAL = 36


def _params(run: Path, rank: int = 0) -> dict[str, torch.Tensor]:
    return torch.load(run / "probe" / f"params-rank{rank}.pt")


def _checkpoint_step(run: Path) -> int:
    return torch.load(run / "checkpoints" / "latest.pt", weights_only=True)["step"]


def _stop_mid_run(runner, paths, name: str, send) -> subprocess.CompletedProcess:
    """Start a slowed-down 2-rank run, call ``send(proc, run_dir)`` after 5 steps, wait for the end."""
    proc = runner.start_torchrun(name, paths["probe"], [*ARGS, "--step-sleep", "0.05"])
    run = runner.run_dir(name)
    metrics = run / "metrics" / "rank-0.jsonl"
    try:
        runner.wait_for(lambda: metrics.exists() and len(metrics.read_text().splitlines()) >= 5, 60,
                        "5 steps in rank 0's metrics")
        send(proc, run)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            runner.kill(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


@pytest.fixture(scope="module")
def reference(runner_at, paths, tmp_path_factory) -> dict[str, torch.Tensor]:
    """Final rank-0 parameters of an uninterrupted 2-rank probe run (shared by the resume tests)."""
    runner = runner_at(tmp_path_factory.mktemp("reference"))
    done = runner.torchrun("reference", paths["probe"], ARGS)
    assert done.returncode == 0, done.stdout
    return _params(runner.run_dir("reference"))


def _assert_same(reference: dict[str, torch.Tensor], got: dict[str, torch.Tensor]) -> None:
    """Exact: same data order, RNG (dropout), AdamW state and reduction order as the reference run."""
    worst = max((reference[k] - got[k]).abs().max().item() for k in reference)
    assert worst == 0.0, f"resumed parameters differ from the uninterrupted run by up to {worst}"


@pytest.mark.slow
def test_sigusr1_to_one_rank_stops_all_ranks_and_the_resumed_run_matches_an_uninterrupted_one(
    runner, paths, reference
) -> None:

    def usr1_to_rank1(proc: subprocess.Popen, run: Path) -> None:
        os.kill(int((run / "probe" / "pid-rank1").read_text()), signal.SIGUSR1)

    cut = _stop_mid_run(runner, paths, "cut", usr1_to_rank1)
    assert cut.returncode == 0, cut.stdout
    assert "stop requested (a signal on another rank)" in cut.stdout  # rank 0 got no signal
    run = runner.run_dir("cut")
    stopped_at = _checkpoint_step(run)
    assert 5 <= stopped_at < TOTAL and not (run / "probe" / "rank-0.json").exists()

    resumed = runner.torchrun("cut", paths["probe"], ARGS)
    assert resumed.returncode == 0, resumed.stdout
    assert f"resumed from {run / 'checkpoints' / 'latest.pt'} step={stopped_at}" in resumed.stdout
    for rank in (0, 1):
        report = runner.probe_report("cut", rank)
        assert report["resumed_step"] == stopped_at > 0 and report["steps"] == TOTAL
        assert len(report["indices"]) == (TOTAL - stopped_at) * 8  # only the batches not done yet
    _assert_same(reference, _params(run))


@pytest.mark.slow
def test_a_killed_rank_loses_only_the_steps_since_the_periodic_checkpoint(runner, paths, reference) -> None:
    crashed = runner.torchrun("crash", paths["probe"], [*ARGS, "--checkpoint-every", "4", "--kill-at", "14"])
    assert crashed.returncode != 0
    run = runner.run_dir("crash")
    assert _checkpoint_step(run) == 12  # the last multiple of 4 before the kill after step 14

    resumed = runner.torchrun("crash", paths["probe"], [*ARGS, "--checkpoint-every", "4"])
    assert resumed.returncode == 0, resumed.stdout
    assert runner.probe_report("crash", 0)["resumed_step"] == 12
    steps = [m["step"] for m in runner.metrics("crash", 0)]
    assert steps.count(13) == 2 and sorted(set(steps)) == list(range(1, TOTAL + 1))  # 13, 14 redone
    _assert_same(reference, _params(run))


@pytest.mark.slow
def test_sigterm_to_torchrun_reaches_the_workers_which_checkpoint_and_exit_0(runner, paths) -> None:
    cut = _stop_mid_run(runner, paths, "term", lambda proc, run: proc.send_signal(signal.SIGTERM))
    assert cut.returncode != 0  # torchrun itself reports the SIGTERM it got
    assert "stop requested (SIGTERM)" in cut.stdout, cut.stdout
    for rank in (0, 1):
        assert f"finish rank={rank} step=" in cut.stdout and "exit_code=0" in cut.stdout
    assert 5 <= _checkpoint_step(runner.run_dir("term")) < TOTAL


@pytest.mark.parametrize(("scontrol_rc", "exit_code"), [(0, 0), (1, 1)])
def test_stop_signal_requeues_the_array_task_from_rank_0(runner, paths, tmp_path, scontrol_rc, exit_code):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "scontrol.log"
    fake = bin_dir / "scontrol"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\necho "fake scontrol failed" >&2\nexit {scontrol_rc}\n')
    fake.chmod(0o755)
    done = runner.python(
        "requeue", paths["probe"], ["--epochs", "1", "--steps-per-epoch", "10", "--signal-at", "4"],
        COCKPIT_REQUEUE="1", SLURM_JOB_ID="1207", SLURM_ARRAY_JOB_ID="1200", SLURM_ARRAY_TASK_ID="7",
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    )
    assert done.returncode == exit_code, done.stdout
    assert log.read_text().split() == ["requeue", "1200_7"]
    assert _checkpoint_step(runner.run_dir("requeue")) == 4
    assert ("requeued Slurm job 1200_7" in done.stdout) == (scontrol_rc == 0)


def test_a_stop_signal_without_a_run_dir_exits_128_plus_the_signal(runner, paths, tmp_path) -> None:
    args = ["--epochs", "1", "--steps-per-epoch", "10", "--signal-at", "3", "--out", str(tmp_path)]
    done = runner.python("no-run-dir", paths["probe"], args, COCKPIT_RUN_DIR="")
    assert done.returncode == 128 + signal.SIGUSR1, done.stdout
    assert "stop requested (SIGUSR1) at step 3; no COCKPIT_RUN_DIR, so nothing was saved" in done.stdout
    assert "run_dir=-" in done.stdout
