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

from cockpit import runs
from cockpit.launch import registry
from cockpit.launch.local import launcher as local
from cockpit.launch.protocol import Warn
from cockpit.runs import UNREADABLE, RunStatus, write_status


def _quiet(_text: str) -> None:
    pass


def request_stop(run_dir: Path, status: RunStatus, grace: float, by: str = "cockpit stop") -> bool:
    """Ask the run's supervisor to stop it; False when there is no live supervisor to ask. The grace goes
    first, in <run>/stop.json: the supervisor's stop waits that long before SIGKILL (not its launch --grace)."""
    if not local.supervisor_alive(status):
        return False
    # A full or read-only disk: the stop still happens, with the grace given at launch.
    with contextlib.suppress(OSError):
        runs.request_stop(run_dir, grace, by)
    return local.request_stop(status)


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
    launchers = [None if s.state == UNREADABLE else registry.for_run(s, fallback="local") for _, s in rows]
    surveys: dict[type, object] = {}
    for launcher in launchers:
        if launcher is not None and type(launcher) not in surveys:
            surveys[type(launcher)] = launcher.survey([s for _, s in rows], warn)
    return [(run_dir, status) if launcher is None  # unreadable: nothing to work out from, never written back
            else (run_dir, launcher.recover(run_dir, status, surveys[type(launcher)], warn))
            for (run_dir, status), launcher in zip(rows, launchers, strict=True)]
