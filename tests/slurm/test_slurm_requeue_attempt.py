"""Slurm's own requeue is an attempt of the run (issue 30): `scontrol requeue` of a running job on the real test
cluster starts its batch script again with SLURM_RESTART_COUNT=1. The batch script gives the ranks
COCKPIT_ATTEMPT=1 and a marker line in every rank log; the supervisor records attempt 0 as ended "requeued by
Slurm" and attempt 1 as the next, so the goodput, ps's ATTEMPTS and the diagnosis of the last attempt are right."""

from __future__ import annotations

import json

import pytest
from helpers import wait_for
from slurm.test_slurm_runs import (
    HERE,
    NO_PREFLIGHT,
    cockpit,
    job_id_of,
    rank0_log,
    runs,  # noqa: F401  (the fixture)
    start_cockpit,
    write_job,
)

from cockpit.run.store import list_runs, read_status
from cockpit.slurm import query as slurm_query

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("asks", [True, False], ids=["slurm.requeue", "no-slurm.requeue"])
def test_a_requeue_by_slurm_is_the_runs_next_attempt(slurm_cluster, tmp_path, runs, monkeypatch, asks):  # noqa: F811
    """With slurm.requeue: true (#SBATCH --requeue), and without: Slurm's default JobRequeue=1 lets `scontrol
    requeue` requeue any batch job, and its passing FAILED state must not end the run."""
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    job = write_job(tmp_path, "slrq", script=HERE / "requeue_train.py", args=["--steps", "200", "--sleep", "0.05"],
                    nodes=1, procs_per_node=2, slurm={"time": "10", "requeue": asks, **NO_PREFLIGHT})
    proc = start_cockpit(slurm_cluster, runs, "run", str(job), "-q")
    run_dir = wait_for(lambda: list_runs(runs) and list_runs(runs)[0][0], 30, "the run directory")
    job_id = job_id_of(run_dir)
    wait_for(lambda: "[cockpit] step=20 " in rank0_log(run_dir), 180, "training to reach step 20")
    slurm_cluster.run("scontrol", "requeue", job_id)

    def requeued():
        view = slurm_query.squeue([job_id]).get(job_id)
        return view is not None and view.restarts == 1 and view.slurm_state == "PENDING"

    wait_for(requeued, 120, "Slurm to requeue the job")
    slurm_cluster.hurry(job_id)  # a requeued job is held back ~120 s: start it now
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    status = read_status(run_dir)
    assert status.state == "succeeded", status
    first, second = status.attempts
    assert (first.attempt, first.end, second.attempt, second.end) == (0, "requeued", 1, "succeeded"), status.attempts
    assert first.cause == f"requeued by Slurm (SLURM_RESTART_COUNT=1, job {job_id})", first
    assert first.ended is not None and first.started < first.ended <= second.started < second.ended, status.attempts
    assert first.step is not None and first.step >= 20 and second.step == 200, status.attempts
    assert first.lost_s is not None and first.lost_s > 0, first  # the requeue's cost: restart, steps made again
    assert status.goodput is not None and 0 < status.goodput < 1, status.goodput
    log = rank0_log(run_dir)
    assert f"[cockpit] attempt 1 (COCKPIT_ATTEMPT=1): requeued by Slurm (SLURM_RESTART_COUNT=1, job {job_id} " in log
    assert "attempts: 2" in out and "to Slurm's requeues" in out, out
    [row] = json.loads(cockpit(slurm_cluster, runs, "ps", "--json").stdout)["runs"]
    assert [a["end"] for a in row["attempts"]] == ["requeued", "succeeded"] and row["goodput"] == status.goodput
    table = cockpit(slurm_cluster, runs, "ps").stdout.splitlines()
    at = table[0].split().index("ATTEMPTS")
    assert next(line for line in table if line.startswith(status.run_id)).split()[at] == "2", table
    assert len(list((run_dir / "logs/attempt-0").glob("rank-*.exit"))) == 2
