"""What every sbatch call of a run shares: the environment it runs with and how its answer is read. Used by
the first submission (cockpit.launch.slurm.launcher) and the resubmission without a bad node
(cockpit.launch.slurm.preflight), which the supervisor makes."""

from __future__ import annotations

import os

from cockpit import contract
from cockpit.launch.site import LaunchError


def submit_env() -> dict[str, str]:
    """This environment without cockpit's contract variables: sbatch copies the submitter's environment
    into the job (--export=ALL), and the script sets those itself."""
    return {k: v for k, v in os.environ.items() if k not in contract.ALL}


def parse_job_id(stdout: str) -> str:
    """``sbatch --parsable`` prints "<job id>" or "<job id>;<cluster>"."""
    job_id = stdout.strip().splitlines()[-1].split(";")[0].strip() if stdout.strip() else ""
    if not job_id.isdigit():
        raise LaunchError(f"sbatch answered {stdout.strip()!r}, not a job id (hint: is `sbatch` Slurm's?)")
    return job_id
