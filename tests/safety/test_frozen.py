"""A frozen supervisor (issue 27, 8): SIGSTOP stands in for a supervisor stuck in a hung NFS write. Before,
`cockpit stop` waited 34 s, printed "RUN: running" and exited 1, and `ps` said HEALTH ok. Now `ps` says the
supervisor is frozen (pid, state T), and `cockpit stop` names it, stops the ranks itself and records the stop.
A real torchrun with two ranks of a plain script; every wait is on a condition."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, wait_for

from cockpit.launch import procs
from cockpit.run.store import list_runs, read_status

pytestmark = pytest.mark.slow
SCRIPT = "import os, time\nfor i in range(6000):\n    print('rank', os.environ['RANK'], 'step', i, flush=True)\n" \
         "    time.sleep(0.05)\n"


def env_for(runs: Path) -> dict[str, str]:
    return {**os.environ, "COCKPIT_RUNS_DIR": str(runs), "NO_COLOR": "1", "PYTHONPATH": str(REPO)}


def cockpit(runs: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=REPO,
                          env=env_for(runs), timeout=120, check=False)


def test_a_frozen_supervisor_is_named_and_stop_stops_the_ranks_directly(tmp_path):
    runs = tmp_path / "runs"
    (tmp_path / "loop.py").write_text(SCRIPT)
    job = tmp_path / "frozen.yaml"
    job.write_text(f"name: frozen\nscript: {tmp_path / 'loop.py'}\nlauncher: local\ngpus: none\nprocs_per_node: 2\n")
    run = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(job), "-q"], cwd=REPO, env=env_for(runs),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sup = None
    try:
        run_dir = wait_for(lambda: list_runs(runs) and list_runs(runs)[0][0], 60, "the run directory")
        wait_for(lambda: all("step 5" in p.read_text() for p in run_dir.glob("logs/rank-*.log"))
                 and len(list(run_dir.glob("logs/rank-*.log"))) == 2, 90, "both ranks to step")
        status = read_status(run_dir)
        sup = status.supervisor["pid"]
        os.kill(sup, signal.SIGSTOP)
        wait_for(lambda: procs.state(sup) == "T", 10, "the supervisor to be stopped")
        ps = cockpit(runs, "ps")
        assert ps.returncode == 0 and f"frozen: supervisor pid {sup} state T" in ps.stdout, ps.stdout
        assert len(procs.run_pids(status.run_id)) >= 3  # torchrun and its ranks (and their wrappers)
        stop = cockpit(runs, "stop", run_dir.name, "--grace", "3")
        assert stop.returncode == 0, stop.stderr
        assert f"the supervisor (pid {sup}) is frozen: state T" in stop.stderr
        assert f"{run_dir.name}: stopped" in stop.stderr and "running" not in stop.stderr
        assert procs.run_pids(status.run_id) == []  # every process of the run, the supervisor aside
        after = read_status(run_dir)
        assert after.state == "stopped" and f"pid {sup}" in after.note
        assert procs.state(sup) == "T"  # left as it was: it records the stop itself once it thaws
        os.kill(sup, signal.SIGCONT)
        wait_for(lambda: not procs.is_alive(sup), 60, "the thawed supervisor to end")
        assert read_status(run_dir).state == "stopped"
    finally:
        if sup is not None and procs.is_alive(sup):
            os.kill(sup, signal.SIGCONT)
            os.kill(sup, signal.SIGKILL)
        run.kill()
        run.wait(10)
