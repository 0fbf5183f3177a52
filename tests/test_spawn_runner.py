"""`runner: spawn`: a script that calls torch.multiprocessing.spawn itself, run as it is (jobs/own/spawn.yaml),
real gloo DDP on CPU. Each spawned process must get its own rank log and exit record, and the summary and the
diagnosis must name the rank that failed first, whether it raised or was killed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env

from cockpit.run.store import list_runs

pytestmark = pytest.mark.slow
JOB = "jobs/own/spawn.yaml"


def run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=REPO,
                          env=cockpit_env(COCKPIT_RUNS_DIR=str(tmp_path), NO_COLOR="1", **(env or {})),
                          timeout=180)


def failing(tmp_path: Path, mode: str):
    """A copy of the spawn job whose rank 1 fails at epoch 1 (FAIL_MODE raise | kill)."""
    job = tmp_path / f"spawn-{mode}.yaml"
    text = (REPO / JOB).read_text().replace("script: spawn_ddp.py", f"script: {REPO / 'jobs/own/spawn_ddp.py'}")
    job.write_text(text + f'env:\n  FAIL_RANK: "1"\n  FAIL_MODE: {mode}\n')
    r = run(tmp_path, "run", str(job))
    [(run_dir, status)] = list_runs(tmp_path)
    return r, run_dir, status


def test_each_spawned_process_is_a_rank_with_its_own_log_and_exit(tmp_path):
    r = run(tmp_path, "run", JOB)
    assert r.returncode == 0, r.stdout + r.stderr
    [(run_dir, status)] = list_runs(tmp_path)
    host = status.hosts[0]
    assert status.state == "succeeded" and sorted(status.ranks) == ["0", "1"]
    for rank in (0, 1):
        lines = (run_dir / "logs" / f"rank-{rank}.{host}.log").read_text().splitlines()
        assert [ln for ln in lines if ln.startswith("spawned rank")] == [
            ln for ln in lines if ln.startswith(f"spawned rank {rank} epoch ")], lines  # only its own, unglued
        assert len(lines) == 3 and all(ln.count("spawned") == 1 for ln in lines), lines
        assert (run_dir / "logs" / f"rank-{rank}.{host}.exit").read_text().split()[0] == "0"
        assert f"[{host}:{rank}] spawned rank {rank} epoch 2" in r.stdout
    assert "spawning 2 processes" in (run_dir / "logs" / f"agent.{host}.log").read_text()
    assert f"[{host}:agent] spawning 2 processes" in r.stdout


def test_a_rank_that_raises_is_the_first_failure_with_its_traceback_in_its_own_log(tmp_path):
    r, run_dir, status = failing(tmp_path, "raise")
    assert r.returncode == 1, r.stdout + r.stderr
    host = status.hosts[0]
    assert status.first_failure.rank == 1 and status.first_failure.description == "exit code 1"
    assert "RuntimeError: rank 1 failed on purpose" in (run_dir / "logs" / f"rank-1.{host}.log").read_text()
    assert "first failure: rank 1" in r.stdout
    d = run(tmp_path, "diagnose", str(run_dir), "--json")
    first = json.loads(d.stdout)["findings"][0]
    assert first["code"] == "first_failure" and "rank 1" in first["title"], first


def test_a_killed_spawned_rank_gets_its_exit_record_from_the_spawner(tmp_path):
    r, run_dir, status = failing(tmp_path, "kill")
    assert r.returncode == 1, r.stdout + r.stderr
    host = status.hosts[0]
    assert (run_dir / "logs" / f"rank-1.{host}.exit").read_text().split()[0] == "137"
    assert status.first_failure.rank == 1 and "SIGKILL" in status.first_failure.description, status.first_failure
