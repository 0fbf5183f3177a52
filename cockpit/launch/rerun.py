"""`cockpit sweep rerun RUN --failed`: run a sweep's failed trials again, with identical arguments, as a NEW run
that says which run and trials it reruns. The old run stays as it ended, logs and all.

Why a new run and not a new attempt inside the old one: a run directory is written by one supervisor and read
by everyone else; a second life inside a finished run would need every reader (ps, attach, the summary, the
TUI) to tell attempts apart. A new run is followed, stopped and summarized like any other.

Identical arguments: the new run's scripts are the old run's own rendered scripts (each local trial's
``commands/node-0.sh``, the Slurm array's ``commands/sbatch.sh`` with its case table of every trial's
arguments), with only the run id (and so the run directory) changed, so whatever the job file or the
``-- ARGS`` were then, they are what runs now. Trials keep their index: trial 3 of the rerun is trial 3 of
the sweep. A Slurm rerun submits the same script as ``--array=<failed indices>``.

What differs by launcher is the launcher's (``has_sweeps``, ``rerun_sweep``, ``rerun_trial``, ``schedule``):
this module lays out what every rerun shares and never names one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.launch import registry
from cockpit.launch.site import LaunchError
from cockpit.run import layout
from cockpit.run.records import NodeRecord
from cockpit.run.store import (
    RunStatus,
    create_run_dir,
    install_hook,
    is_sweep,
    new_run_id,
    read_status,
    write_private,
    write_status,
)
from cockpit.run.trust import own_run

if TYPE_CHECKING:
    from cockpit.launch.protocol import Launcher

FAILED = ("failed", "lost")


def failed_trials(run_dir: Path, status: RunStatus) -> list[NodeRecord]:
    """The sweep's trials that failed (or were lost), by each trial's own status where it has one."""
    out = []
    for node in status.nodes:
        if node.trial is None:
            continue
        own = read_status(Path(node.run_dir)) if node.run_dir else None
        state = own.state if own is not None and own.final else node.state
        if state in FAILED:
            out.append(node)
    return out


def renamed(text: str, old_id: str, new_id: str) -> str:
    """A script of run ``old_id`` as run ``new_id`` runs it: the run id (and the run directory it names)."""
    return text.replace(old_id, new_id)


def prepare_rerun(run_dir: Path, status: RunStatus) -> Path:
    """The new run directory for the failed trials of the sweep ``run_dir`` (not started; Slurm: not
    submitted). LaunchError when there is nothing to rerun; safeio.Untrusted for a run of another user (its
    scripts are copied and run: never as the caller)."""
    own_run(run_dir, "sweep rerun", "rerun the scripts of")
    if not is_sweep(status):
        raise LaunchError(f"{status.run_id} is not a sweep (hint: cockpit run the job again)")
    if not status.final:
        raise LaunchError(f"{status.run_id} is {status.state}: rerun its failed trials once it has ended "
                          f"(hint: wait, or cockpit stop {status.run_id})")
    failed = failed_trials(run_dir, status)
    if not failed:
        raise LaunchError(f"{status.run_id}: no trial failed, nothing to rerun")
    launcher = registry.known_for_run(status)
    if launcher is None or not launcher.has_sweeps:
        raise LaunchError(f"{status.run_id}: launcher {status.launcher} has no sweeps")
    new_id = new_run_id(status.name)
    new_dir = create_run_dir(run_dir.parent, new_id)
    write_private(new_dir / layout.JOB, (run_dir / layout.JOB).read_text(encoding="utf-8"))
    indices = [n.trial.index for n in failed if n.trial is not None]  # (failed_trials keeps trials only)
    which = f"rerun of failed trials {', '.join(map(str, indices))} of {status.run_id}"
    sweep = RunStatus(run_id=new_id, name=status.name, launcher=status.launcher, job_file=status.job_file,
                      hosts=[], world_size=None, stall_after=status.stall_after, on_stall=status.on_stall,
                      start_after=status.start_after)
    for node in failed:
        sweep.nodes.append(_trial(launcher, run_dir, status, new_dir, new_id, node, which))
    sweep.note = launcher.rerun_sweep(run_dir, new_dir, lambda text: renamed(text, status.run_id, new_id), failed,
                                      which)
    write_private(new_dir / layout.RERUN, json.dumps({"of": status.run_id, "trials": indices}) + "\n")
    write_status(new_dir, sweep)
    return new_dir


def rerun_of(run_dir: Path) -> str | None:
    """``rerun of failed trials 1, 3 of RUN`` for a rerun's run directory; None for any other run. Kept in
    rerun.json, since the supervisor rewrites the run's note as it goes."""
    try:
        data = json.loads((run_dir / layout.RERUN).read_text(encoding="utf-8"))
        return f"rerun of failed trials {', '.join(map(str, data['trials']))} of {data['of']}"
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _trial(launcher: Launcher, run_dir: Path, status: RunStatus, new_dir: Path, new_id: str, node: NodeRecord,
           which: str) -> NodeRecord:
    """Trial ``node`` of the old sweep, laid out in the new one: its directory, its launcher's scripts, its
    status; the new sweep's record of it."""
    t = node.trial
    assert t is not None  # failed_trials keeps trials only
    old_tdir = Path(node.run_dir) if node.run_dir else layout.trial_dir(run_dir, t.index)
    tdir = layout.trial_dir(new_dir, t.index)
    (tdir / layout.LOGS).mkdir(mode=0o700, parents=True)
    (tdir / layout.COMMANDS).mkdir(mode=0o700)
    install_hook(tdir)
    record = launcher.rerun_trial(old_tdir, tdir, lambda text: renamed(text, status.run_id, new_id), t)
    tdir.chmod(0o700)
    old = read_status(old_tdir)
    write_status(tdir, RunStatus(run_id=f"{new_id}.{layout.trial_name(t.index)}", name=status.name,
                                 launcher=status.launcher, job_file=status.job_file,
                                 # a trial that runs here runs on the same host; Slurm picks a trial's nodes
                                 hosts=list(old.hosts) if old and launcher.runs_here else [],
                                 world_size=old.world_size if old else None,
                                 note=f"trial {t.index}: {' '.join(t.args)} ({which})"))
    return record


def rerun_failed(run_dir: Path, status: RunStatus, grace: float = 10.0) -> Path:
    """Prepare the rerun, submit it (Slurm) and start its supervisor; returns the new run directory."""
    from cockpit import launch

    new_dir = prepare_rerun(run_dir, status)
    registry.for_run(status).schedule(new_dir)  # Slurm: sbatch; the others have nothing to hand over
    launch.start(new_dir, grace=grace)
    return new_dir
