"""What every sbatch call of a run shares: the facts its script is rendered with, the environment it runs with
and how its answer is read. Used by `cockpit render`, the first submission (cockpit.launch.slurm.job) and the
resubmission without a bad node (cockpit.launch.slurm.relaunch), which the supervisor makes."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from cockpit import contract
from cockpit.launch.site import LaunchError, facts_for, interpreter

if TYPE_CHECKING:
    from cockpit.render.site import Site
    from cockpit.spec.model import JobSpec


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


def render_facts(spec: JobSpec, job_path: str, run_dir: str, run_id: str, master_port: int,
                 extra_args: tuple[str, ...] = ()) -> Site:
    """Slurm names the nodes at run time (node0, node1, ... stand for them); python3 on the nodes unless the job
    names one."""
    return facts_for(spec, job_path, run_dir, run_id, master_port, extra_args, python=interpreter(spec),
                     master_addr=spec.hosts[0] if spec.hosts else "",
                     node_names=tuple(f"node{i}" for i in range(spec.num_nodes)))

