"""Stopping a run and working out its state, whatever its launcher and whether or not its supervisor is
still alive. The CLI (`cockpit ps`, `attach`, `stop`) and the TUI (Runs, the run view's stop) both go
through here, so both say and do the same thing.

- ``request_stop``: a live supervisor is asked to stop the run (it owns the teardown); for ssh runs the
  grace period is handed to it first, since the nodes' SIGKILL waits on it.
- ``stop_orphan``: no supervisor: the run's launcher stops the job (scancel for Slurm, the stop script on
  every node over SSH, a kill of the run's processes here for local runs); recorded in status.json.
- ``reconcile_runs``: runs whose supervisor died are worked out again by their launchers: local ones from
  their exit records, Slurm ones from one batched squeue (or accounting) call for all of them, ssh ones by
  asking their nodes.

Which launcher a run has is cockpit.launch.registry's business, never tested here.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from cockpit.launch import procs, registry, supervision
from cockpit.launch.protocol import Warn
from cockpit.run import store as runs
from cockpit.run.store import UNREADABLE, RunStatus, write_status
from cockpit.run.trust import owner


def _quiet(_text: str) -> None:
    pass


def request_stop(run_dir: Path, status: RunStatus, grace: float, by: str = "cockpit stop") -> bool:
    """Ask the run's supervisor to stop it; False when there is no live supervisor to ask. The grace goes
    first, in <run>/stop.json: the supervisor's stop waits that long before SIGKILL (not its launch --grace)."""
    if not supervision.supervisor_alive(status):
        return False
    # A full or read-only disk: the stop still happens, with the grace given at launch.
    with contextlib.suppress(OSError):
        runs.request_stop(run_dir, grace, by)
    return supervision.request_stop(status, run_dir)


def frozen_supervisor(status: RunStatus) -> tuple[int, str] | None:
    """(pid, state) when the run's supervisor is alive but frozen: stopped (T) or stuck in IO (D, a hung
    network file system): it cannot act on a stop until it thaws."""
    sup = supervision.supervisor_pid(status)
    if sup is None or not procs.is_alive(*sup):
        return None
    letter = procs.frozen(sup[0])
    return None if letter is None else (sup[0], letter)


FROZEN_FOR = 1.0  # seconds a supervisor stays frozen (T/D) after a stop before its ranks are stopped directly


def still_frozen(status: RunStatus, seconds: float) -> tuple[int, str] | None:
    """(pid, state) when the run's supervisor is frozen now and still after ``seconds`` (a stop was just sent:
    a live one acts on it at once); None as soon as it is not."""
    deadline = time.monotonic() + seconds
    while (frozen := frozen_supervisor(status)) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    return frozen


def describe_frozen(frozen: tuple[int, str]) -> str:
    pid, letter = frozen
    return f"the supervisor (pid {pid}) is frozen: state {letter}, {procs.FROZEN[letter]}"


def stop_frozen(run_dir: Path, status: RunStatus, grace: float, frozen: tuple[int, str], by: str = "cockpit stop",
                warn: Warn = _quiet) -> RunStatus:
    """Stop the ranks of a run whose supervisor is frozen, directly (its launcher's stop, as for a run with no
    supervisor; the SIGTERM it was sent waits for it to thaw, and then it records the end itself). The status
    is written here only for a stopped supervisor (T): one stuck in IO (D) most likely waits on the file
    system that status.json is on, and a write there would hang this command too."""
    note = registry.for_run(status, fallback="local").stop(run_dir, status, grace, by, warn)
    status.note = f"{describe_frozen(frozen)}; {by} stopped the ranks directly: {note}"
    status.state, status.ended, status.stop_requested = "stopped", time.time(), True
    status.stopped_at = status.stopped_at or status.ended
    if frozen[1] != "D":
        write_status(run_dir, status)
    return status


def stop_orphan(run_dir: Path, status: RunStatus, grace: float, by: str = "cockpit stop",
                warn: Warn = _quiet) -> RunStatus:
    """Stop a run that has no supervisor and record it (state stopped, a note saying how); raises LaunchError
    when the launcher's tools cannot be used (scancel refused, the ssh plan unreadable)."""
    status.note = registry.for_run(status, fallback="local").stop(run_dir, status, grace, by, warn)
    status.state, status.ended, status.stop_requested = "stopped", time.time(), True
    write_status(run_dir, status)
    return status


def reconcile_runs(rows: list[tuple[Path, RunStatus]], warn: Warn = _quiet) -> list[tuple[Path, RunStatus]]:
    """``rows`` with the state of runs whose supervisor died worked out again (and written back). Each
    launcher first takes one batched look at its runs (its survey: one squeue for all Slurm runs)."""
    # unreadable: nothing to work out from; another user's: read-only (cockpit.run.trust), never written back
    launchers = [None if s.state == UNREADABLE or owner(d) is not None else registry.for_run(s, fallback="local")
                 for d, s in rows]
    surveys: dict[type, object] = {}
    for launcher in launchers:
        if launcher is not None and type(launcher) not in surveys:
            surveys[type(launcher)] = launcher.survey([s for _, s in rows], warn)
    return [(run_dir, status) if launcher is None
            else (run_dir, launcher.recover(run_dir, status, surveys[type(launcher)], warn))
            for (run_dir, status), launcher in zip(rows, launchers, strict=True)]
