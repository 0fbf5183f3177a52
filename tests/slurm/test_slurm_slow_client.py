"""A slow Slurm controller (issue 33 item 9): the test cluster's slurmctld stopped (SIGSTOP), so that the real sinfo
and sbatch wait on it as on a busy or unreachable controller. `cockpit run` says what it waits for (one line on
stderr, after about 2 s); a cockpit ended during sbatch's wait records the run as unsubmitted, never `starting`
forever, and `ps` lists it so; one ended during sinfo's wait (the preflight) makes nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from helpers import REPO, wait_for
from slurm.test_slurm_runs import env_for, write_job

from cockpit.run.store import list_runs

pytestmark = pytest.mark.slow


class Cockpit:
    """A `cockpit` process whose stderr is read as it comes."""

    def __init__(self, cluster, runs, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "cockpit", *args], cwd=REPO, env=env_for(cluster, runs),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.err: list[str] = []
        self.reader = threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True)
        self.reader.start()

    def said(self, words: str) -> bool:
        return any(words in line for line in list(self.err))

    def end(self, signum: int) -> int:
        self.proc.send_signal(signum)
        rc = self.proc.wait(60)
        self.reader.join(10)
        return rc


@pytest.fixture
def stopped_controller(slurm_cluster):
    """slurmctld stopped for the test (every client waits on it), continued after it whatever happens."""
    pid = slurm_cluster.pids["slurmctld"]
    os.kill(pid, signal.SIGSTOP)
    try:
        yield slurm_cluster
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_slow_controller_is_said_and_an_ended_submit_is_recorded_unsubmitted(stopped_controller, tmp_path):
    cluster, runs = stopped_controller, tmp_path / "runs"
    job = str(write_job(tmp_path, "slowctl", nodes=1, procs_per_node=1))
    # the preflight's sinfo: said, and Ctrl-C there makes nothing
    began = time.monotonic()
    c = Cockpit(cluster, runs, "run", job)
    wait_for(lambda: c.said("waiting for sinfo"), 60, "the line about sinfo")
    assert time.monotonic() - began >= 2.0  # not at once: an answer within 2 s is no wait worth a line
    assert c.end(signal.SIGINT) == 130, "".join(c.err)
    assert not runs.exists() or list_runs(runs) == []
    # sbatch: said, and SIGTERM there ends cockpit with the run recorded as not submitted
    c = Cockpit(cluster, runs, "run", job, "--no-preflight")
    wait_for(lambda: c.said("waiting for sbatch"), 60, "the line about sbatch")
    assert c.end(signal.SIGTERM) == 128 + signal.SIGTERM, "".join(c.err)
    assert "Traceback" not in "".join(c.err), "".join(c.err)
    [(_, status)] = list_runs(runs)
    assert status.state == "unsubmitted" and "while sbatch was submitting" in (status.note or ""), status
    os.kill(cluster.pids["slurmctld"], signal.SIGCONT)  # ps asks nothing of Slurm for an ended run; continue anyway
    r = subprocess.run([sys.executable, "-m", "cockpit", "ps"], capture_output=True, text=True, cwd=REPO,
                       env=env_for(cluster, runs), timeout=120)
    row = next(line for line in r.stdout.splitlines() if line.startswith(status.run_id))
    assert row.split()[1] == "unsubmitted", r.stdout


def _sbatch_of(run_dir) -> list[int]:
    """The pids of the sbatch processes submitting ``run_dir``'s script (left behind by a killed cockpit)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"sbatch") and any(str(run_dir).encode() in a for a in argv):
                found.append(int(entry))
    return found


def test_a_cockpit_killed_during_submit_leaves_its_run_unsubmitted_not_starting(stopped_controller, tmp_path):
    """SIGKILL cannot be handled: the run's status.json names the submitting cockpit (pid, start time, host, boot),
    and `ps` finds it gone and records the run unsubmitted, without asking Slurm (the controller is still stopped)."""
    cluster, runs = stopped_controller, tmp_path / "runs"
    job = str(write_job(tmp_path, "killedsub", nodes=1, procs_per_node=1))
    c = Cockpit(cluster, runs, "run", job, "--no-preflight")
    wait_for(lambda: c.said("waiting for sbatch"), 60, "the line about sbatch")
    [(run_dir, status)] = list_runs(runs)
    assert status.state == "starting" and status.submitter and status.submitter["pid"] == c.proc.pid, status
    assert c.end(signal.SIGKILL) == -signal.SIGKILL
    for pid in _sbatch_of(run_dir):  # the orphaned sbatch would submit the job once the controller answers
        os.kill(pid, signal.SIGKILL)
    r = subprocess.run([sys.executable, "-m", "cockpit", "ps", "--json"], capture_output=True, text=True, cwd=REPO,
                       env=env_for(cluster, runs), timeout=60)
    assert r.returncode == 0, r.stderr
    [run] = [run for run in json.loads(r.stdout)["runs"] if run["run_id"] == status.run_id]
    assert run["state"] == "unsubmitted", run
    assert f"pid {c.proc.pid}" in run["note"] and "sbatch" in run["note"], run["note"]
    [(_, recorded)] = list_runs(runs)  # written back: every later reader sees it without working it out again
    assert recorded.state == "unsubmitted" and recorded.ended is not None, recorded
    r = subprocess.run([sys.executable, "-m", "cockpit", "diagnose", "--json", status.run_id], capture_output=True,
                       text=True, cwd=REPO, env=env_for(cluster, runs), timeout=60)
    assert [f["code"] for f in json.loads(r.stdout)["findings"]] == ["unsubmitted"], r.stdout + r.stderr
    # the controller may still take the request sbatch had sent before it was killed: no such job is left behind
    os.kill(cluster.pids["slurmctld"], signal.SIGCONT)
    cluster.run("scancel", "--name", "killedsub", check=False, timeout=60)
