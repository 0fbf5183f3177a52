"""sbatch's filename patterns (``--output`` / ``--error``: ``%j``, ``%A_%a``, ``%x``, ...) resolved for one job.

Pure. Why cockpit resolves them itself: ``squeue -O STDOUT`` returns the pattern as submitted (made absolute
against the job's WorkDir), and ``scontrol show job``'s own resolution (22.05) leaves ``%N``, ``%t`` and ``%%``
unresolved. The rules are ``man sbatch`` "filename pattern" plus what slurmstepd was seen to write on the test
cluster (slurm-wlm 22.05.8): ``%a`` in a job that is not an array becomes 4294967294 (NO_VAL - 1), and a
``\\`` anywhere turns every replacement off.

What only the node knows (``%N`` its host name, ``%s`` the step) becomes a wildcard: the caller globs for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NOT_AN_ARRAY = "4294967294"  # what slurmstepd writes for %a when the job is not an array task
WILDCARD = "*"
_TOKEN = re.compile(r"%(\d*)([%AaJjNnstux])")


@dataclass(frozen=True)
class PatternFacts:
    """What a pattern may refer to, for one job (or array task) as Slurm reports it."""

    job_id: str  # Slurm's own id of the job or task (%j): an array task has its own
    array_job_id: str | None = None  # %A; None: not an array
    array_task_id: str | None = None  # %a
    user: str | None = None  # %u
    name: str | None = None  # %x


@dataclass(frozen=True)
class Resolved:
    path: str
    wildcard: bool  # the path holds WILDCARD where only the node knew the value (%N, %s): glob for it


def resolve(pattern: str, facts: PatternFacts) -> Resolved:
    """The file name slurmstepd made of ``pattern`` for the batch script of this job (task 0, node 0)."""
    if "\\" in pattern:
        return Resolved(pattern.replace("\\", ""), False)
    wild = False

    def one(match: re.Match) -> str:
        nonlocal wild
        width, letter = match.group(1), match.group(2)
        value = _value(letter, facts)
        if value is None:
            wild = True
            return WILDCARD
        return value.zfill(int(width)) if width and value.isdigit() else value

    return Resolved(_TOKEN.sub(one, pattern), wild)


def _value(letter: str, f: PatternFacts) -> str | None:
    if letter == "%":
        return "%"
    if letter == "A":
        return f.array_job_id or f.job_id
    if letter == "a":
        return f.array_task_id if f.array_job_id and f.array_task_id is not None else NOT_AN_ARRAY
    if letter in "jJ":
        return f.job_id
    if letter in "nt":  # the batch script is task 0 on the job's first node
        return "0"
    if letter == "u":
        return f.user
    if letter == "x":
        return f.name
    return None  # N, s: only the node knows
