"""A local run whose supervisor died (killed, machine rebooted) is worked out again from its ranks' exit
records: all of them there and zero -> succeeded; one non-zero -> failed; any missing -> lost, never
succeeded (`cockpit sweep rerun --failed` reruns failed and lost trials: a lost one read as succeeded is
never rerun). The supervisor here is a real process, killed and reaped; the run directory is the real layout."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env

from cockpit.launch import procs
from cockpit.launch.supervision import reconcile
from cockpit.run.store import RunStatus, read_status, write_status


def dead_supervisor() -> dict:
    """{"pid", "start"} of a process that ran and was killed, as status.json records a supervisor."""
    proc = subprocess.Popen(["sleep", "60"])
    record = {"pid": proc.pid, "start": procs.start_time(proc.pid)}
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return record


def run_with_exits(runs: Path, exits: dict[int, int], world_size: int = 2) -> Path:
    run_dir = runs / "demo-20260101-000000-ab12"
    (run_dir / "logs").mkdir(parents=True)
    write_status(run_dir, RunStatus(run_id=run_dir.name, name="demo", launcher="local", job_file="job.yaml",
                                    hosts=["vm"], world_size=world_size, state="running",
                                    created=time.time() - 3600, supervisor=dead_supervisor()))
    for rank, code in exits.items():
        (run_dir / "logs" / f"rank-{rank}.vm.log").write_text(f"[cockpit] start rank={rank} world={world_size}\n")
        (run_dir / "logs" / f"rank-{rank}.vm.exit").write_text(f"{code} {1_000_000.0 + rank}\n")
    return run_dir


@pytest.mark.parametrize(("exits", "state"), [
    ({0: 0}, "lost"),  # rank 1 left no record: it may have died with the supervisor
    ({1: 0}, "lost"),
    ({}, "lost"),
    ({0: 0, 1: 0}, "succeeded"),
    ({0: 0, 1: 1}, "failed"),
], ids=["rank-1-missing", "rank-0-missing", "none", "all-zero", "one-failed"])
def test_a_dead_supervisors_run_reads_from_its_exit_records(tmp_path, exits, state):
    run_dir = run_with_exits(tmp_path, exits)
    status = reconcile(run_dir, read_status(run_dir))
    assert status.state == state and read_status(run_dir).state == state
    assert "supervisor died" in status.note
    assert sorted(int(r) for r in status.ranks) == sorted(exits)


def test_partial_exit_records_of_a_wider_run_are_lost_too(tmp_path):
    run_dir = run_with_exits(tmp_path, {0: 0, 1: 0, 2: 0}, world_size=4)
    assert reconcile(run_dir, read_status(run_dir)).state == "lost"


def test_ps_shows_such_a_run_as_lost(tmp_path):
    run_with_exits(tmp_path, {0: 0})
    r = subprocess.run([sys.executable, "-m", "cockpit", "ps", "--json"], capture_output=True, text=True, cwd=REPO,
                       env=cockpit_env(COCKPIT_RUNS_DIR=str(tmp_path), NO_COLOR="1"), timeout=60)
    assert r.returncode == 0, r.stderr
    [run] = json.loads(r.stdout)["runs"]
    assert run["state"] == "lost" and "supervisor died" in run["note"]
