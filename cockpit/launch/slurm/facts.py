"""What the Slurm preflight (cockpit.preflight.slurm) looks at: the job's files on this submit host, and
sinfo's nodes per partition, asked through ``run`` (subprocess.run's shape: tests and callers inject it)."""

from __future__ import annotations

import subprocess

from cockpit.launch.site import interpreter, job_files
from cockpit.launch.slurm.waiting import said_after
from cockpit.preflight.slurm import SlurmFacts
from cockpit.slurm.sinfo import SINFO_ARGS, parse_sinfo
from cockpit.spec.model import JobSpec


def gather(spec: JobSpec, job_path: str, run=subprocess.run, timeout: float = 30.0) -> SlurmFacts:
    files = job_files(spec, job_path, interpreter(spec))
    try:
        with said_after(f"sinfo: the Slurm controller is slow to answer (up to {timeout:g} s)"):
            r = run(list(SINFO_ARGS), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SlurmFacts(files, None, f"sinfo: {exc}")
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        return SlurmFacts(files, None, last)
    return SlurmFacts(files, tuple(parse_sinfo(r.stdout)))


def check(spec: JobSpec, job_path: str, run=None) -> list:
    """The Slurm preflight (cockpit.preflight.slurm) over sinfo's answer (``run``: subprocess.run's shape);
    raises PreflightFailed with doctor's lines, before anything waits in the queue. Returns the checks."""
    from cockpit.launch.site import PreflightFailed
    from cockpit.preflight import checks as preflight
    from cockpit.preflight.slurm import slurm_checks

    checks = slurm_checks(spec, gather(spec, job_path, run or subprocess.run))
    if preflight.failed(checks):
        raise PreflightFailed(job_path, checks)
    return checks
