"""Users' own training scripts, run as they are by `cockpit run` under the local launcher (torchrun, 2 CPU
ranks, gloo): a Lightning Trainer(strategy="ddp"), an accelerate Accelerator() and a plain torch.distributed
script (jobs/own/). None imports cockpit; cockpit still gives each rank its own log, an exit record per rank,
the summary and the first failure with its exception.

Decisive per kind: each framework sets up the process group its own way (accelerate on CPU silently skips it
without the ACCELERATE_USE_CPU=1 cockpit sets for a job without GPUs) and handles SIGTERM its own way
(Lightning installs a handler), so the world size each rank reports and how rank 0 ends after rank 1 fails
are checked for each kind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env

from cockpit.run.store import list_runs

pytestmark = pytest.mark.slow
OWN = REPO / "jobs" / "own"
# kind -> (job file, the line each rank prints once it knows its place in a world of 2, a progress line)
KINDS = {
    "lightning": ("lightning_ddp.yaml", "lightning: rank {r} of 2, TorchElasticEnvironment",
                  "lightning: rank {r} epoch 1 step 16 loss "),
    "accelerate": ("accelerate_ddp.yaml", "accelerate: process {r} of 2 (DistributedType.MULTI_CPU, gloo)",
                   "accelerate: process {r} epoch 1 step 16 loss "),
    "plain": ("plain_ddp.yaml", "plain: rank {r} of 2 (local {r}) on cpu", "plain: rank {r} step 20 loss "),
}


def cockpit(runs: Path, *args: str) -> subprocess.CompletedProcess:
    env = cockpit_env(COCKPIT_RUNS_DIR=str(runs), NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=180)


def only_run(runs: Path):
    [(run_dir, status)] = list_runs(runs)
    return run_dir, status


def test_own_job_files_are_valid(tmp_path):
    jobs = sorted(str(OWN / job) for job, _, _ in KINDS.values())
    r = cockpit(tmp_path, "validate", *jobs)
    assert r.returncode == 0 and r.stdout.splitlines() == [f"{j}: ok" for j in jobs], r.stdout + r.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_own_script_runs_with_a_log_and_an_exit_record_per_rank(tmp_path, kind):
    job, placed, progress = KINDS[kind]
    r = cockpit(tmp_path, "run", str(OWN / job))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    run_dir, status = only_run(tmp_path)
    host = status.hosts[0]
    assert status.state == "succeeded" and status.exit_code == 0 and status.world_size == 2
    assert {k: (v.rank, v.host, v.status) for k, v in status.ranks.items()} == {"0": (0, host, 0),
                                                                                "1": (1, host, 0)}
    assert sorted(p.name for p in (run_dir / "logs").glob("rank-*.log")) == [f"rank-{r}.{host}.log" for r in (0, 1)]
    assert [(run_dir / f"logs/rank-{r}.{host}.exit").read_text().split()[0] for r in (0, 1)] == ["0", "0"]
    for rank, other in ((0, 1), (1, 0)):
        log = (run_dir / f"logs/rank-{rank}.{host}.log").read_text()
        # its own lines, and none of the other rank's: the world of 2 is real, not two lone processes
        assert placed.format(r=rank) in log and progress.format(r=rank) in log, log[-2000:]
        assert placed.format(r=other) not in log and progress.format(r=other) not in log
        assert f"[{host}:{rank}] {progress.format(r=rank)}" in r.stdout
    assert f"({status.run_id}): succeeded in" in r.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_own_script_failing_on_rank_1_is_named_first_with_its_exception(tmp_path, kind):
    job, _, _ = KINDS[kind]
    r = cockpit(tmp_path, "run", str(OWN / job), "-q", "--", "--fail-rank", "1", "--fail-step", "5")
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    run_dir, status = only_run(tmp_path)
    host = status.hosts[0]
    first = status.first_failure
    assert status.state == "failed" and (first.rank, first.host, first.status) == (1, host, 1)
    assert sorted(status.ranks) == ["0", "1"] and status.ranks["1"].status == 1
    assert status.ranks["0"].time >= first.time  # rank 0 ended after (torchrun stopped it), never before
    assert f"first failure: rank 1 on {host}: exit code 1" in r.stdout
    # the exception, from rank 1's own log, in the summary
    assert f"RuntimeError: {kind}: {'process' if kind == 'accelerate' else 'rank'} 1 failed on purpose at step 5" \
        in r.stdout, r.stdout[-3000:]
    assert "failed on purpose" not in (run_dir / f"logs/rank-0.{host}.log").read_text()
