"""procs.kill_run, and the ssh launcher's stop script on a node, leave every rank its exit record, even when the
rank wrapper gets a core only seconds after its rank ended (a loaded machine): the real wrapper, a real rank
process, the wrapper held stopped (SIGSTOP) across the old 2 s bound and let go after it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from cockpit import contract
from cockpit.launch import procs
from cockpit.launch.ssh.shell import stop_script
from cockpit.render.rankwrap import WRAPPER

# the rank: says it runs, then sleeps; "term" ends of SIGTERM, "ignore" needs SIGKILL
RANK = """import signal, sys, time
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(sys.argv[2], "w").close()
time.sleep(600)
"""


def _wait(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
    return got


def _stop_script(run_id: str, grace: float) -> int:
    r = subprocess.run(["sh", "-c", stop_script(run_id, grace)], capture_output=True, text=True, timeout=60)
    return int(r.stdout.split()[1])  # FOUND KILLED LEFT


@pytest.mark.parametrize("stop", [procs.kill_run, _stop_script], ids=["local", "ssh-node"])
@pytest.mark.parametrize("rank_mode", ["ignore", "term"])
def test_a_wrapper_that_runs_again_late_still_records_its_rank_s_end(tmp_path: Path, rank_mode: str, stop):
    run_id = f"killrun-{uuid.uuid4().hex[:8]}"
    (tmp_path / "logs").mkdir()
    wrapper = tmp_path / "rank-wrapper.h1.sh"
    wrapper.write_text(WRAPPER)
    ready = tmp_path / "ready"
    env = {**os.environ, contract.RUN_ID: run_id, "COCKPIT_RUN_DIR": str(tmp_path), "COCKPIT_HOST": "h1",
           "RANK": "3"}
    proc = subprocess.Popen(["bash", str(wrapper), sys.executable, "-c", RANK, rank_mode, str(ready)], env=env,
                            start_new_session=True)  # as torchrun 2.x starts a worker
    try:
        _wait(ready.exists, 30, "the rank to start")
        os.kill(proc.pid, signal.SIGSTOP)  # the wrapper gets no core for a while
        resume = threading.Timer(3.0, os.kill, (proc.pid, signal.SIGCONT))
        resume.start()
        began = time.monotonic()
        killed = stop(run_id, 0.5)
        took = time.monotonic() - began
        resume.join()
        assert proc.wait(10) in (0, 137, 143)
        record = tmp_path / "logs" / "rank-3.h1.exit"
        assert record.exists(), f"no exit record after the stop ({took:.1f} s, {killed} needed SIGKILL)"
        status = int(record.read_text().split()[0])
        assert status == (137 if rank_mode == "ignore" else 143)
        assert killed == (1 if rank_mode == "ignore" else 0)  # the rank alone needed SIGKILL, never its wrapper
        assert procs.run_pids(run_id) == []
    finally:
        with_pids = procs.run_pids(run_id)
        procs.signal_pids(with_pids, signal.SIGCONT)
        procs.signal_pids(with_pids, signal.SIGKILL)
        proc.wait(10)
