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
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from cockpit.launch.plan import LaunchError
from cockpit.run import layout
from cockpit.run.records import NodeRecord, SlurmJob, Trial
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

FAILED = ("failed", "lost")
_ARRAY = re.compile(r"^#SBATCH --array=\S+$", re.MULTILINE)


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


def with_array(script: str, indices: list[int]) -> str:
    """The batch script with ``--array`` set to exactly ``indices`` (the old ``%N`` limit kept)."""
    m = _ARRAY.search(script)
    if m is None:
        raise LaunchError("the run's sbatch.sh has no #SBATCH --array line: not a sweep's job array")
    limit = m.group(0).partition("%")[2]
    line = "#SBATCH --array=" + ",".join(map(str, indices)) + (f"%{limit}" if limit else "")
    return script[:m.start()] + line + script[m.end():]


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
    if status.launcher not in ("local", "slurm"):
        raise LaunchError(f"{status.run_id}: launcher {status.launcher} has no sweeps")
    new_id = new_run_id(status.name)
    new_dir = create_run_dir(run_dir.parent, new_id)
    write_private(new_dir / layout.JOB, (run_dir / layout.JOB).read_text(encoding="utf-8"))
    indices = [n.trial.index for n in failed]
    which = f"rerun of failed trials {', '.join(map(str, indices))} of {status.run_id}"
    sweep = RunStatus(run_id=new_id, name=status.name, launcher=status.launcher, job_file=status.job_file,
                      hosts=[], world_size=None, stall_after=status.stall_after, on_stall=status.on_stall,
                      start_after=status.start_after)
    for node in failed:
        sweep.nodes.append(_trial(run_dir, status, new_dir, new_id, node, which))
    if status.launcher == "slurm":
        old = (run_dir / layout.SBATCH_SCRIPT).read_text(encoding="utf-8")
        write_private(new_dir / layout.SBATCH_SCRIPT, with_array(renamed(old, status.run_id, new_id), indices))
        sweep.note = which
    else:
        slots = len({n.trial.slot for n in failed})
        sweep.note = f"{which}, {slots} at a time"
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


def _trial(run_dir: Path, status: RunStatus, new_dir: Path, new_id: str, node: NodeRecord,
           which: str) -> NodeRecord:
    """Trial ``node`` of the old sweep, laid out in the new one: its directory, script (local) and status."""
    t = node.trial
    old_tdir = Path(node.run_dir) if node.run_dir else layout.trial_dir(run_dir, t.index)
    tdir = layout.trial_dir(new_dir, t.index)
    (tdir / layout.LOGS).mkdir(mode=0o700, parents=True)
    (tdir / layout.COMMANDS).mkdir(mode=0o700)
    install_hook(tdir)
    if (layout.hook_dir(old_tdir) / layout.NODECHECK).is_file():  # the old script runs the Slurm preflight
        from cockpit.launch.slurm.launcher import install_nodecheck

        install_nodecheck(tdir)
    tdir.chmod(0o700)
    old = read_status(old_tdir)
    if status.launcher == "local":
        script = layout.node_script(old_tdir, 0).read_text(encoding="utf-8")
        write_private(layout.node_script(tdir, 0), renamed(script, status.run_id, new_id))
    write_status(tdir, RunStatus(run_id=f"{new_id}.{layout.trial_name(t.index)}", name=status.name,
                                 launcher=status.launcher, job_file=status.job_file,
                                 hosts=list(old.hosts) if old and status.launcher == "local" else [],
                                 world_size=old.world_size if old else None,
                                 note=f"trial {t.index}: {' '.join(t.args)} ({which})"))
    if status.launcher == "slurm":
        return NodeRecord(layout.trial_name(t.index), t.index, run_dir=str(tdir), trial=Trial(t.index, t.args),
                          slurm=SlurmJob(None), null_keys=frozenset({"job_id"}))
    return NodeRecord(layout.trial_name(t.index), t.index, state="pending", run_dir=str(tdir),
                      trial=Trial(t.index, t.args, t.gpus, t.slot))


def rerun_failed(run_dir: Path, status: RunStatus, grace: float = 10.0) -> Path:
    """Prepare the rerun, submit it (Slurm) and start its supervisor; returns the new run directory."""
    from cockpit import launch

    new_dir = prepare_rerun(run_dir, status)
    if status.launcher == "slurm":
        from cockpit.launch.slurm.launcher import submit

        submit(new_dir)
    launch.start(new_dir, grace=grace)
    return new_dir
