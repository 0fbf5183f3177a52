"""recover: on Slurm: the next attempt of a run is the same batch script submitted again into the same run
directory, without the nodes the diagnosis blamed.

Why a new submission and not ``scontrol requeue`` of the ended job: sbatch's ``--exclude`` on the command line
wins over the script's #SBATCH lines, a new job starts as soon as Slurm has room (a requeued one waits about
120 s before it may start again), and it works where the cluster keeps finished jobs briefly (MinJobAge) or
forbids requeue (JobRequeue=0). The run keeps one id and one directory; its node record's ``job_id`` is the
current job and ``earlier_jobs`` the ones before it, ``excluded`` every node left out so far (a node once blamed
stays out for the rest of the run), as the preflight's resubmission (cockpit.launch.slurm.preflight) keeps them.

Each command is an argv list run without a shell; ``shown`` quotes it (shlex) for the run's note.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import replace
from pathlib import Path

from cockpit import contract
from cockpit.launch.slurm.submission import parse_job_id, submit_env
from cockpit.run import layout
from cockpit.run.records import NodeRecord, SlurmJob
from cockpit.run.store import RunStatus
from cockpit.slurm.command import SlurmError

SBATCH_TIMEOUT = 120.0


def excluded(status: RunStatus) -> tuple[str, ...]:
    """The nodes the run's job was submitted without so far."""
    job = _job(status).slurm
    return tuple(job.excluded or ()) if job is not None else ()


def sbatch_argv(run_dir: Path, exclude: tuple[str, ...], test_only: bool = False, sbatch: str = "sbatch") -> list[str]:
    """``sbatch --parsable [--test-only] [--exclude=A,B] SCRIPT``: no --exclude where no node is left out."""
    argv = [sbatch, "--parsable", *(["--test-only"] if test_only else [])]
    argv += [f"--exclude={','.join(exclude)}"] if exclude else []
    return [*argv, str((run_dir / layout.SBATCH_SCRIPT).resolve())]


def shown(argv: list[str]) -> str:
    return shlex.join(argv)


def node_names(status: RunStatus, leave_out: tuple[str, ...]) -> tuple[str, ...]:
    """The blamed nodes that are nodes of the run (where its hosts are known): a finding may name what no node of
    the run is called (NCCL RAS names an address no node has), which --exclude would refuse as a bad node name."""
    hosts = set(status.hosts or ())
    return tuple(n for n in leave_out if n in hosts) if hosts else leave_out


def replacement(run_dir: Path, status: RunStatus, leave_out: tuple[str, ...], sbatch: str = "sbatch") -> str | None:
    """None where Slurm could run the job without ``leave_out`` (and the nodes left out before); else why not,
    from ``sbatch --test-only``, which asks the scheduler without submitting anything."""
    leave_out = node_names(status, leave_out)
    exclude = tuple(dict.fromkeys((*excluded(status), *leave_out)))
    argv = sbatch_argv(run_dir, exclude, test_only=True, sbatch=sbatch)
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=SBATCH_TIMEOUT, cwd=run_dir,
                           env=submit_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Slurm could not be asked for another node ({shown(argv)}: {exc})"
    if r.returncode != 0:
        said = (r.stderr or r.stdout).strip().replace("\n", "; ")
        return f"Slurm has no other node for the job without {','.join(exclude)} ({shown(argv)}: {said})"
    return None


def resubmit(run_dir: Path, status: RunStatus, attempt: int, leave_out: tuple[str, ...],
             sbatch: str = "sbatch") -> str:
    """Submit attempt ``attempt`` of the run; ``status``'s node record follows the new job. Returns the command.
    COCKPIT_ATTEMPT goes to the job through sbatch's environment (the script keeps it, see
    cockpit.render.sbatch). Raises SlurmError with sbatch's answer."""
    entry = _job(status)
    old = entry.slurm or SlurmJob(None)
    leave_out = node_names(status, leave_out)
    exclude = tuple(dict.fromkeys((*excluded(status), *leave_out)))
    argv = sbatch_argv(run_dir, exclude, sbatch=sbatch)
    env = {**submit_env(), contract.ATTEMPT: str(attempt)}
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=SBATCH_TIMEOUT, cwd=run_dir, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmError(f"{shown(argv)}: {exc}") from None
    if r.returncode != 0:
        raise SlurmError(f"{shown(argv)} exited {r.returncode}: {(r.stderr or r.stdout).strip()}")
    job_id = parse_job_id(r.stdout)
    earlier = (*(old.earlier_jobs or ()), *([old.job_id] if old.job_id else []))
    status.nodes[status.nodes.index(entry)] = replace(
        entry, state=None, exit_code=None,
        slurm=SlurmJob(job_id, earlier_jobs=earlier, excluded=exclude or None))
    return f"submitted as Slurm job {job_id}: {shown(argv)}"


def _job(status: RunStatus) -> NodeRecord:
    if len(status.nodes) != 1:
        raise SlurmError(f"run {status.run_id} has {len(status.nodes)} Slurm jobs; recover: relaunches a run of one")
    return status.nodes[0]
