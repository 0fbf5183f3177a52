"""The Slurm launcher without a cluster: run directory layout, job ids, attempts read from a real requeued
run's logs (fixtures/requeue-run), and the state of runs whose supervisor died."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from cockpit.launch import LaunchError
from cockpit.launch.slurm import attempts as slurm_attempts
from cockpit.launch.slurm import job as slurm
from cockpit.run.store import read_status
from cockpit.slurm.query import JobView
from cockpit.spec.model import load_spec

FIXTURES = Path(__file__).parent / "fixtures"


def sweep_job(tmp_path: Path) -> Path:
    job = {"name": "sw", "script": "train.py", "launcher": "slurm", "nodes": 1, "gpus": 2,
           "sweep": {"grid": {"lr": [0.1, 0.01], "layers": [2]}}}
    path = tmp_path / "sw.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def test_prepare_writes_the_script_and_one_directory_per_trial(tmp_path):
    job = sweep_job(tmp_path)
    run_dir = slurm.prepare(load_spec(job), str(job), tmp_path / "runs", ("--x", "1"))
    script = (run_dir / slurm.SCRIPT).read_text()
    assert "#SBATCH --array=0-1" in script and "--x 1" in script and "--gres=gpu:2" in script
    status = read_status(run_dir)
    assert (status.state, status.launcher, status.world_size) == ("starting", "slurm", None)
    assert [(n.host, n.trial.index, n.trial.args, n.slurm.job_id) for n in status.nodes] == [
        ("trial-0", 0, ("--lr", "0.1", "--layers", "2"), None), ("trial-1", 1, ("--lr", "0.01", "--layers", "2"), None)]
    for i in (0, 1):
        trial = run_dir / f"trial-{i}"
        assert oct(trial.stat().st_mode & 0o777) == "0o700" and (trial / "logs").is_dir()
        assert read_status(trial).world_size == 2 and read_status(trial).run_id == f"{status.run_id}.trial-{i}"


def test_job_ids_from_sbatch_parsable():
    assert slurm.parse_job_id("4242\n") == "4242"
    assert slurm.parse_job_id("4242;cluster2\n") == "4242"
    with pytest.raises(LaunchError, match="not a job id"):
        slurm.parse_job_id("Submitted batch job 4242")


def test_submit_without_sbatch_marks_the_run_unsubmitted(tmp_path):
    job = sweep_job(tmp_path)
    run_dir = slurm.prepare(load_spec(job), str(job), tmp_path / "runs")
    with pytest.raises(LaunchError, match="sbatch is not installed"):
        slurm.submit(run_dir, sbatch=str(tmp_path / "no-such-sbatch"))
    status = read_status(run_dir)
    assert status.state == "unsubmitted" and status.note == "sbatch is not installed here"
    for i in (0, 1):  # each trial is a run of its own (`cockpit ps`, `cockpit logs RUN/trial-1`): never submitted
        trial = read_status(run_dir / f"trial-{i}")
        assert (trial.state, trial.exit_code) == ("unsubmitted", 1), trial
        assert trial.note.endswith("; sbatch is not installed here") and trial.ended == status.ended


def test_attempts_of_a_real_requeued_run(tmp_path):
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES / "requeue-run" / "logs", logs)
    log = slurm_attempts.AttemptLog(logs / "agent.sbatch.log", logs)
    attempts = log.read()
    assert attempts == [slurm_attempts.Attempt(0, "2", "n1", None, 1795424827.0),
                        slurm_attempts.Attempt(1, "2", "n1", 221, 1795424876.0)]  # (each start line's time=)
    assert slurm_attempts.describe(attempts) == "requeued 1 time: restart 1 resumed at step 221"
    assert log.read() == attempts  # incremental: nothing new, same answer
    assert not log.requeue_asked  # the requeue was before the last start
    with open(logs / "agent.sbatch.log", "a") as f:  # as slurmstepd writes it when the job requeues itself
        f.write("slurmstepd-n1: error: *** JOB 2 ON n1 CANCELLED AT 2026-11-25T17:41:34 DUE TO JOB REQUEUE ***\n")
    log.read()
    assert log.requeue_asked and log.last_restart == 1  # the supervisor waits until Slurm shows restart 2
    with open(logs / "agent.sbatch.log", "a") as f:
        f.write("cockpit: start restart=2 job=2 nodes=n2 master=n2:12002 time=1\n")
    with open(logs / "rank-0.n2.log", "w") as f:
        f.write("[cockpit] start rank=0 world=2 local_rank=0\n[cockpit] resumed from /x/latest.pt step=400 epoch=0 "
                "batch_in_epoch=400\n[cockpit] finish rank=0 step=600 exit_code=0\n[cockpit] start rank=0 wor")
    assert [a.resumed_step for a in log.read()] == [None, 221, 400]  # rank 0 moved to n2 for restart 2
    assert not log.requeue_asked  # it came back
    assert slurm_attempts.describe([attempts[0]]) is None


def test_reconcile_a_slurm_run_whose_supervisor_died(tmp_path):
    job = sweep_job(tmp_path)
    run_dir = slurm.prepare(load_spec(job), str(job), tmp_path / "runs")
    status = read_status(run_dir)
    status.nodes = [replace(n, slurm=replace(n.slurm, job_id=f"7_{i}")) for i, n in enumerate(status.nodes)]
    status.supervisor = {"pid": 2**22 + 1, "start": "1"}  # no such process
    views = {"7_0": JobView("7_0", "COMPLETED", exit_code=0), "7_1": JobView("7_1", "RUNNING", nodes="n1")}
    assert slurm.reconcile(run_dir, status, views).state == "running"
    assert "supervisor is gone" in status.note and read_status(run_dir).state == "starting"  # not written yet
    views["7_1"] = JobView("7_1", "FAILED", "NonZeroExitCode", exit_code=3)
    after = slurm.reconcile(run_dir, status, views)
    assert (after.state, after.exit_code) == ("failed", 3) and "job 7_1 FAILED" in after.note
    assert read_status(run_dir).state == "failed"
    assert slurm.job_views([after]) == {}  # final runs need no query


def test_a_usr1_after_srun_ended_does_not_end_the_batch_shell(tmp_path):
    """The batch script's USR1 trap passes the signal to srun; a USR1 that comes when srun is gone (a requeued
    attempt's end, a second signal) made `kill` fail inside the trap, and `set -e` ended the batch shell with
    status 1: the job FAILED on its way back to the queue."""
    from cockpit.render.sbatch import _signal_forwarding

    script = tmp_path / "batch.sh"
    script.write_text("\n".join(["set -euo pipefail", *_signal_forwarding(), "true & srun_pid=$!; wait",
                                 'kill -USR1 "$$"', "sleep 0.1", "echo survived"]) + "\n")
    r = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=10)
    assert (r.returncode, r.stdout.strip()) == (0, "survived"), r.stderr
