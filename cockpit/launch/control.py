"""Stopping a run and working out its state, whatever its launcher and whether or not its supervisor is
still alive. The CLI (`cockpit ps`, `attach`, `stop`) and the TUI (Runs, the run view's stop) both go
through here, so both say and do the same thing.

- ``request_stop``: a live supervisor is asked to stop the run (it owns the teardown); for ssh runs the
  grace period is handed to it first, since the nodes' SIGKILL waits on it.
- ``stop_orphan``: no supervisor: stop the job ourselves (scancel for Slurm, the stop script on every node
  over SSH, a kill of the run's processes here for local runs) and record it in status.json.
- ``reconcile_runs``: runs whose supervisor died are worked out again: local ones from their exit records,
  Slurm ones from one batched squeue (or accounting) call for all of them, ssh ones by asking their nodes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from cockpit import procs, runs
from cockpit.launch import local
from cockpit.launch.plan import LaunchError
from cockpit.runs import UNREADABLE, RunStatus, write_status

Warn = Callable[[str], None]


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
    if status.launcher == "slurm":
        from cockpit.launch import slurm

        try:
            slurm.cancel(slurm.job_ids(status))
        except slurm.SlurmError as exc:
            raise LaunchError(str(exc)) from None
        status.note = f"cancelled with scancel by {by} (no supervisor)"
    elif status.launcher == "ssh":  # the run's processes are on the nodes: stop them there
        from cockpit.launch import ssh_node

        try:
            stopped = ssh_node.stop_nodes(run_dir, grace)
        except (OSError, ValueError, KeyError) as exc:
            raise LaunchError(f"cannot read the ssh plan: {exc}") from None
        left = ssh_node.left_behind(stopped)
        status.note = f"stopped by {by} without a supervisor, on every node over SSH: " + "; ".join(
            f"{h}: {t}" for h, t in stopped.items()) + (
            f" (processes of the run may still be running on {', '.join(left)})" if left else "")
        for host in left:
            warn(f"{run_dir.name}: {host}: {stopped[host]}")
    else:
        killed = procs.kill_run(status.run_id, grace=grace)
        status.note = f"stopped by {by} without a supervisor ({killed} needed SIGKILL)"
    status.state, status.ended, status.stop_requested = "stopped", time.time(), True
    write_status(run_dir, status)
    return status


def reconcile_runs(rows: list[tuple[Path, RunStatus]], warn: Warn = _quiet) -> list[tuple[Path, RunStatus]]:
    """``rows`` with the state of runs whose supervisor died worked out again (and written back)."""
    views = {}
    if any(s.launcher == "slurm" and not s.final for _, s in rows):
        from cockpit.launch import slurm

        try:
            views = slurm.job_views([s for _, s in rows])
        except slurm.SlurmError as exc:
            warn(f"could not ask Slurm about its jobs: {exc}")
    out = []
    for run_dir, status in rows:
        if status.state == UNREADABLE:  # nothing to work out from, and never written back over
            out.append((run_dir, status))
        elif status.launcher == "slurm":
            from cockpit.launch import slurm

            out.append((run_dir, slurm.reconcile(run_dir, status, views)))
        elif status.launcher == "ssh" and status.supervisor and not status.final \
                and not local.supervisor_alive(status):
            from cockpit.launch import ssh_node

            try:  # the nodes ran on without the supervisor: ask them
                out.append((run_dir, ssh_node.recover(run_dir, status)))
            except (OSError, ValueError, KeyError) as exc:
                warn(f"{run_dir.name}: cannot ask its nodes: {exc}")
                out.append((run_dir, status))
        else:
            out.append((run_dir, local.reconcile(run_dir, status)))
    return out
