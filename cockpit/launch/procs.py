"""Local processes of a run, found by the run id in their environment.

torchrun starts every worker in a session of its own, so killing torchrun's process group does not reach
the ranks, and a rank whose parent died is re-parented to init. Every process of a run — ranks, their data
loader workers, anything they spawn — inherits COCKPIT_RUN_ID, so /proc is searched for it: no process of
the run is left behind, whatever the tree looks like.
"""

from __future__ import annotations

import os
import signal
import time

from cockpit import contract


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) from /proc/PID/stat, or None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().decode(errors="replace").rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], fields[19]


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or None if gone.
    A pid plus its start time names one process even when pids are reused."""
    stat = _stat(pid)
    return None if stat is None else stat[1]


def is_alive(pid: int, started: str | None = None) -> bool:
    """True while ``pid`` (started at ``started``, when given) runs. A zombie (state Z: dead, waiting for a
    parent that has not reaped it) or a dying process (X) is dead: nothing it owned is looked after any more."""
    stat = _stat(pid)
    if stat is None or stat[0] in ("Z", "X"):
        return False
    return started is None or stat[1] == started


FROZEN = {"T": "stopped by a signal", "t": "stopped by a debugger",
          "D": "in uninterruptible IO, e.g. a hung network file system write"}


def state(pid: int) -> str | None:
    """The process's state letter (R, S, D, T, Z, ...) from /proc/PID/stat; None if there is no such process."""
    stat = _stat(pid)
    return None if stat is None else stat[0]


def frozen(pid: int) -> str | None:
    """"T", "t" or "D" when the process is alive but cannot act (stopped, or stuck in IO); else None."""
    letter = state(pid)
    return letter if letter in FROZEN else None


def _mine(pid: int) -> bool:
    """The process runs as the caller (its /proc directory is owned by its effective uid)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.geteuid()
    except OSError:
        return False


def has_run_id(pid: int, run_id: str) -> bool:
    """``pid`` is a live process of the caller's whose environment carries COCKPIT_RUN_ID=<run_id>: a
    process of that run, whatever file named the pid (a pid file can be stale, or planted)."""
    if not _mine(pid) or not is_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = b"\0" + f.read()
    except OSError:
        return False
    return b"\0" + f"{contract.RUN_ID}={run_id}".encode() + b"\0" in env + b"\0"


def is_supervisor(pid: int, started: str | None, run_dir: str | os.PathLike[str]) -> bool:
    """``pid`` is the caller's live cockpit supervisor of ``run_dir`` (started at ``started``): its command
    line names the module and a directory that is ``run_dir``. A pid and a start time alone can be copied
    from /proc by anyone into a status.json; what a process runs, and as whom, cannot."""
    if not _mine(pid) or not is_alive(pid, started):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = f.read(1 << 16).split(b"\0")
    except OSError:
        return False
    if b"cockpit.launch.supervisor" not in words:
        return False
    where = words[words.index(b"cockpit.launch.supervisor") + 1:][:1]
    try:
        return bool(where) and os.path.samefile(os.path.join(f"/proc/{pid}/cwd", os.fsdecode(where[0])), run_dir)
    except (OSError, ValueError):
        return False


def run_pids(run_id: str) -> list[int]:
    """Pids of live processes whose environment carries COCKPIT_RUN_ID=<run_id> (zombies excluded)."""
    needle = f"{contract.RUN_ID}={run_id}".encode() + b"\0"
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = b"\0" + f.read()
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if b"\0" + needle in env and state != b"Z":
            found.append(int(name))
    return found


def signal_pids(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            continue  # already gone, or not ours to signal


def is_rank_wrapper(pid: int) -> bool:
    """The rank wrapper (cockpit.render.rankwrap): the bash that records its rank's exit."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"/rank-wrapper." in f.read()
    except OSError:
        return False


def parent_pid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def first_term(pids: list[int]) -> list[int]:
    """Who gets the first SIGTERM of a stop, so that each rank gets exactly one: torchrun passes it to its
    workers (the rank wrappers) and each wrapper to its rank, so a wrapper whose torchrun is in the run is left
    to it, and so is that wrapper's rank. A second SIGTERM is not harmless: Lightning's handler acts on each."""
    alive = set(pids)
    relayed = {p for p in pids if is_rank_wrapper(p) and parent_pid(p) in alive}
    return [p for p in pids if p not in relayed and parent_pid(p) not in relayed]


WRAPPER_GRACE_S = 10.0  # a wrapper whose rank is gone ends at once; on a loaded machine, once it gets a core


def kill_run(run_id: str, grace: float, wrapper_grace: float = WRAPPER_GRACE_S) -> int:
    """SIGTERM every process of the run (each rank once: ``first_term``), SIGKILL what is left after ``grace``
    seconds: the ranks first, so that their wrappers (which pass SIGTERM on and outlive it) still record how
    they ended, then, once no wrapper is left or after at most ``wrapper_grace`` seconds, anything left. The
    wrappers get that time also where every rank ended of the SIGTERM: a wrapper killed before it ran again
    leaves its rank without an exit record (seen under load with a 2 s bound). Returns how many needed SIGKILL."""
    pids = run_pids(run_id)
    signal_pids(first_term(pids), signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        time.sleep(0.1)
        pids = run_pids(run_id)
    work = [p for p in pids if not is_rank_wrapper(p)]
    signal_pids(work, signal.SIGKILL)
    deadline = time.monotonic() + wrapper_grace
    left = run_pids(run_id) if work else pids
    while time.monotonic() < deadline and any(map(is_rank_wrapper, left)):  # not for what keeps coming back
        time.sleep(0.1)
        left = run_pids(run_id)
    # listed again: a wrapper that ended after the last listing (its command line gone before its environment
    # was) is no process that needed SIGKILL
    left = run_pids(run_id) if left else left
    signal_pids(left, signal.SIGKILL)
    _until_gone(run_id, KILLED_GONE_S)
    return len(work) + len(left)


KILLED_GONE_S = 10.0  # a SIGKILLed process lingers until the kernel has run its exit: a loaded machine's moment


def _until_gone(run_id: str, timeout: float) -> None:
    """Returns once no process of the run is left (SIGKILLing any that came since the last look), or after
    ``timeout``: callers record the run's end and say that nothing of it is left."""
    deadline = time.monotonic() + timeout
    while (left := run_pids(run_id)) and time.monotonic() < deadline:
        signal_pids(left, signal.SIGKILL)
        time.sleep(0.05)
