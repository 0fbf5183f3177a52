"""The supervisor seen from outside, whatever the launcher: start it detached, find it from status.json, ask
it to stop, and work out a run's state from its ranks' exit records when it died. Every launcher and both
faces use these; none is a launcher's own (cockpit.launch.local, ssh and slurm each import this module,
never each other)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cockpit import contract
from cockpit.launch import procs
from cockpit.launch.site import LaunchError
from cockpit.run import layout
from cockpit.run.store import RunStatus, failure_record, first_failure, rank_exits, rank_record, write_status


def start(run_dir: Path, grace: float = 10.0) -> int:
    """Start the detached supervisor; returns its pid.

    It is not our child: it forks once more and its first process exits at once (reaped here), so it is
    re-parented to init. A child would stay a zombie after dying until we reaped it, and to everyone else
    (cockpit ps, attach) a zombie's pid still looks taken."""
    env = {k: v for k, v in os.environ.items() if k not in contract.ALL}
    fd = os.open(run_dir / layout.SUPERVISOR_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with open(fd, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "cockpit.launch.supervisor", str(run_dir),
                                 "--grace", str(grace), "--detach"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=log, start_new_session=True, env=env)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    words = out.split()
    if proc.returncode != 0 or not words or not words[0].isdigit():
        raise LaunchError(f"the supervisor did not start (exit {proc.returncode}): see "
                          f"{run_dir / layout.SUPERVISOR_LOG}")
    return int(words[0])


def supervisor_pid(status: RunStatus) -> tuple[int, str | None] | None:
    """(pid, start time) of the run's supervisor as status.json names it; None when it names none (or
    something that is no pid)."""
    sup = status.supervisor or {}
    pid, start = sup.get("pid"), sup.get("start")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    return pid, start if isinstance(start, str) else None


def supervisor_alive(status: RunStatus) -> bool:
    sup = supervisor_pid(status)
    return sup is not None and procs.is_alive(*sup)


def request_stop(status: RunStatus, run_dir: Path) -> bool:
    """Ask the run's supervisor to stop the run; False if there is no live supervisor to ask. The pid is
    signalled only when it is this run's supervisor (procs.is_supervisor), never because a file said so."""
    sup = supervisor_pid(status)
    if sup is None or not procs.is_supervisor(*sup, run_dir):
        return False
    os.kill(sup[0], signal.SIGTERM)
    return True


# a run made, then its cockpit ended (SIGKILL, the OOM killer) before the supervisor was started: nothing ran
NEVER_SUPERVISED = ("no supervisor was ever recorded: the cockpit that made the run ended (killed) before it started "
                    "one, so no rank ran")


def reconcile(run_dir: Path, status: RunStatus, started_within: float = 30.0) -> RunStatus:
    """Fix the state of a run whose supervisor died (killed, machine rebooted) while nobody watched.

    A run still `starting` within ``started_within`` seconds of creation is left alone (its supervisor may
    not have written its pid yet)."""
    if status.final or supervisor_alive(status):
        return status
    if status.supervisor is None and time.time() - status.created < started_within:
        return status
    if procs.run_pids(status.run_id):
        status.note = "the supervisor is gone but processes of the run are still alive (cockpit stop ends them)"
        return status
    exits = rank_exits(run_dir)
    stop = status.stopped_at
    first = first_failure({r: e for r, e in exits.items() if stop is None or e.time < stop}, run_dir)
    complete = status.world_size is not None and len(exits) >= status.world_size
    if first is not None:
        status.state, status.exit_code = "failed", 1
        status.first_failure = failure_record(run_dir, first)
    elif status.stop_requested:
        status.state, status.exit_code = "stopped", status.exit_code or 1
    elif complete:
        status.state, status.exit_code = "succeeded", 0
    else:
        status.state = "lost"
    status.ranks = {str(r): rank_record(run_dir, e) for r, e in sorted(exits.items())}
    status.ended = max((e.time for e in exits.values()), default=time.time())
    status.note = ("the supervisor died; state worked out from the ranks' exit records" if status.supervisor else
                   NEVER_SUPERVISED if not exits else "no supervisor was recorded; state worked out from the ranks' "
                   "exit records")
    try:
        write_status(run_dir, status)
    except OSError as exc:  # a full or read-only disk: say so, and show the state worked out all the same
        status.note += f" (not recorded in status.json: {exc.strerror or exc})"
    return status
