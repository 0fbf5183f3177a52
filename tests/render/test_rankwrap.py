"""The rank wrapper, run for real: log file per rank, exit record, signals passed on to the rank (under
torchrun) or not (under srun, where slurmstepd signals the rank itself)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import cockpit_env, require_tool, wait_for

from cockpit.render.rankwrap import WRAPPER, wrapper


def start(tmp_path, *cmd: str, rank: str | None = "3", text: str = WRAPPER, session: bool = True) -> subprocess.Popen:
    """The wrapper running ``cmd``; ``session``: in its own session, as torchrun 2.x starts a worker."""
    (tmp_path / "logs").mkdir(exist_ok=True)
    script = tmp_path / "wrap.sh"
    script.write_text(text)
    env = cockpit_env(COCKPIT_RUN_DIR=str(tmp_path), COCKPIT_HOST="h1")
    if rank is not None:
        env["RANK"] = rank
    return subprocess.Popen(["bash", str(script), *cmd], env=env, start_new_session=session)


@pytest.mark.parametrize("forward", [True, False])
def test_wrapper_passes_shellcheck(tmp_path, forward):
    (tmp_path / "w.sh").write_text(wrapper(forward))
    r = subprocess.run([require_tool("shellcheck"), "--severity=info", str(tmp_path / "w.sh")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def test_output_and_exit_status_are_recorded(tmp_path):
    proc = start(tmp_path, "sh", "-c", 'echo "out $0"; echo err >&2; exit 3', "arg with space")
    assert proc.wait(timeout=10) == 3
    assert (tmp_path / "logs/rank-3.h1.log").read_text() == "out arg with space\nerr\n"
    status, when = (tmp_path / "logs/rank-3.h1.exit").read_text().split()
    assert status == "3" and abs(float(when) - time.time()) < 10


def test_no_rank_means_rank_0(tmp_path):
    assert start(tmp_path, "true", rank=None).wait(timeout=10) == 0
    assert (tmp_path / "logs/rank-0.h1.exit").read_text().startswith("0 ")


def test_term_is_passed_on_and_recorded_as_signal(tmp_path):
    marker = tmp_path / "got-term"
    prog = f"trap 'touch {marker}; exit 7' TERM; echo ready; while :; do sleep 0.05; done"
    proc = start(tmp_path, "bash", "-c", prog, session=False)  # torchrun 1.x: signals the wrapper alone
    log = tmp_path / "logs/rank-3.h1.log"
    deadline = time.time() + 10
    while time.time() < deadline and "ready" not in (log.read_text() if log.exists() else ""):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGTERM)  # only the wrapper: it must pass TERM on to the rank
    assert proc.wait(timeout=10) == 7
    assert marker.exists()
    assert (tmp_path / "logs/rank-3.h1.exit").read_text().startswith("7 ")


def test_killed_rank_is_recorded_as_128_plus_signal(tmp_path):
    before = oom_kills()
    proc = start(tmp_path, "sh", "-c", "kill -9 $$")
    assert proc.wait(timeout=10) == 128 + 9
    # after a SIGKILL, the node's count of OOM kills as a third field (cockpit.launch.memblame)
    status, _when, count = (tmp_path / "logs/rank-3.h1.exit").read_text().split()
    assert status == "137" and before <= int(count) <= oom_kills()


def test_a_stop_that_arrives_as_the_rank_dies_records_the_rank_s_own_end(tmp_path):
    """SIGTERM to the wrapper ends its wait; when the rank died of SIGKILL at that moment, the record must say
    SIGKILL, not the wrapper's SIGTERM (a third of the tries did before the fix)."""
    for i in range(30):
        run = tmp_path / str(i)
        run.mkdir()
        proc = start(run, "sleep", "600")  # its own session: the wrapper forwards nothing, traps TERM with ':'
        pid_file = run / "logs/rank-3.h1.pid"
        rank = int(wait_for(lambda f=pid_file: f.exists() and f.read_text().strip(), 10, "the rank's pid", 0.01))
        os.kill(rank, signal.SIGKILL)
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=10) == 137, f"try {i}: {(run / 'logs/rank-3.h1.exit').read_text()!r}"
        assert (run / "logs/rank-3.h1.exit").read_text().startswith("137 ")


def oom_kills() -> int:
    return int(dict(line.split() for line in Path("/proc/vmstat").read_text().splitlines())["oom_kill"])


@pytest.mark.parametrize("form", ["srun", "torchrun"])
def test_a_signal_to_the_whole_group_reaches_the_rank_once(tmp_path, form):
    """slurmstepd signals every process of the step, and torchrun 2.x a worker's whole session (here: the
    process group): the wrapper must not pass USR1 on as well, or the rank's handler runs twice (Lightning:
    two checkpoints, two `scontrol requeue`); it outlives the signals and still records the rank's end."""
    proc = start(tmp_path, sys.executable, "-c", COUNT_USR1, text=wrapper(forward=form == "torchrun"))
    log = tmp_path / "logs/rank-3.h1.log"

    def wait_log(text: str) -> None:
        deadline = time.time() + 10
        while time.time() < deadline and text not in (log.read_text() if log.exists() else ""):
            time.sleep(0.05)
        assert text in log.read_text()

    wait_log("ready")
    os.killpg(proc.pid, signal.SIGUSR1)
    wait_log("usr1 1")
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=10) == 7
    assert log.read_text().splitlines()[-1] == "term after 1"
    assert (tmp_path / "logs/rank-3.h1.exit").read_text().startswith("7 ")


def running(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's zombie waits for init to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("form", ["torchrun2", "torchrun1", "srun"])
def test_a_stop_just_after_the_rank_starts_is_passed_on_and_recorded(tmp_path, form):
    """A TERM that lands after the rank is forked and before the wrapper's traps are set must not kill the
    wrapper alone: that left the rank running, reparented to init, and no exit record. The window is made
    wide and certain: the pid file is a FIFO, so the wrapper blocks writing the rank's pid until the test
    opens it, after the stop. torchrun2/srun: the whole group is signalled; torchrun1: the wrapper alone."""
    (tmp_path / "logs").mkdir()
    pid_file = tmp_path / "logs/rank-3.h1.pid"
    os.mkfifo(pid_file)
    ready = tmp_path / "ready"
    prog = f"import os, pathlib, time; pathlib.Path({str(ready)!r}).write_text(str(os.getpid())); time.sleep(60)"
    proc = start(tmp_path, sys.executable, "-c", prog, text=wrapper(forward=form != "srun"),
                 session=form != "torchrun1")
    rank = int(wait_for(lambda: ready.exists() and ready.read_text(), what="the rank to start", every=0.01))
    try:
        if form == "torchrun1":
            os.kill(proc.pid, signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGTERM)
        fd = os.open(pid_file, os.O_RDONLY | os.O_NONBLOCK)  # lets the wrapper's write go on; open until it ends
        try:
            code = proc.wait(timeout=20)
        finally:
            os.close(fd)
        wait_for(lambda: not running(rank), what="the rank to end")
        exit_record = tmp_path / "logs/rank-3.h1.exit"
        assert (code, exit_record.exists()) == (128 + signal.SIGTERM, True)
        assert exit_record.read_text().split()[0] == str(128 + signal.SIGTERM)
    finally:
        if running(rank):
            os.kill(rank, signal.SIGKILL)


# A rank that counts its SIGUSR1s (a Python handler runs once per signal that arrives while it sleeps).
COUNT_USR1 = """
import signal, sys, time
n = 0
def usr1(*_):
    global n
    n += 1
    print("usr1", n, flush=True)
def term(*_):
    print("term after", n, flush=True)
    sys.exit(7)
signal.signal(signal.SIGUSR1, usr1)
signal.signal(signal.SIGTERM, term)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""
