"""A Slurm sweep's rerun (cockpit.launch.rerun): the old run's array script submitted again as
``--array=<failed indices>``, and each trial's record in the new sweep (its job id known once submitted)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from cockpit.launch.site import LaunchError
from cockpit.launch.slurm.preflight import install_nodecheck
from cockpit.run import layout
from cockpit.run.records import NodeRecord, SlurmJob, Trial
from cockpit.run.store import write_private

_ARRAY = re.compile(r"^#SBATCH --array=\S+$", re.MULTILINE)


def with_array(script: str, indices: list[int]) -> str:
    """The batch script with ``--array`` set to exactly ``indices`` (the old ``%N`` limit kept)."""
    m = _ARRAY.search(script)
    if m is None:
        raise LaunchError("the run's sbatch.sh has no #SBATCH --array line: not a sweep's job array")
    limit = m.group(0).partition("%")[2]
    line = "#SBATCH --array=" + ",".join(map(str, indices)) + (f"%{limit}" if limit else "")
    return script[:m.start()] + line + script[m.end():]


def rerun_array(old_dir: Path, new_dir: Path, rename: Callable[[str], str], indices: list[int]) -> None:
    """The new run's batch script: the old one, renamed, for the failed indices only."""
    old = (old_dir / layout.SBATCH_SCRIPT).read_text(encoding="utf-8")
    write_private(new_dir / layout.SBATCH_SCRIPT, with_array(rename(old), indices))


def rerun_trial(old_tdir: Path, tdir: Path, trial: Trial) -> NodeRecord:
    """A trial to rerun: the Slurm preflight's node side where the old trial's script runs it (its hook has
    the node check); the new sweep's record of it, whose array task's job id is not known before sbatch."""
    if (layout.hook_dir(old_tdir) / layout.NODECHECK).is_file():
        install_nodecheck(tdir)
    return NodeRecord(layout.trial_name(trial.index), trial.index, run_dir=str(tdir),
                      trial=Trial(trial.index, trial.args), slurm=SlurmJob(None), null_keys=frozenset({"job_id"}))
