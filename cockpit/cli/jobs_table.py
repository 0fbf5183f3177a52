"""`cockpit ps --all`: cockpit's runs, then every Slurm job of the user (one squeue call, plus the cluster's
history of finished ones), each job marked with the cockpit run that submitted it, if one did. The table
shows an array as one row (cockpit.slurm.arrays); --json lists every task."""

from __future__ import annotations

import json

from cockpit.slurm.arrays import group, owner, tasks_summary
from cockpit.slurm.jobs import UserJob


def jobs_table(jobs: list[UserJob], owned: dict[str, str]) -> str:
    """The jobs as a table that fits 80 columns; ARRAY/RUN last (an array's tasks, or the owning cockpit run)."""
    out = [f"{'JOBID':<12} {'NAME':<12} {'STATE':<24} {'NODES':<10} {'TIME/LIMIT':<16} ARRAY/RUN"]
    for job, tasks in group(jobs):
        jid = f"{job.array_job_id}_*" if tasks else job.job_id
        state = job.slurm_state + (f" ({job.reason})" if job.reason and job.reason != "None" else "")
        limit = f"{job.elapsed or '-'}/{job.time_limit or '?'}"
        run = owner(job, owned)
        extra = " ".join(x for x in (tasks_summary(tasks) if tasks else "", f"run {run}" if run else "") if x)
        out.append(f"{jid:<12} {job.name[:12]:<12} {state[:24]:<24} {(job.nodes or '-')[:10]:<10} {limit:<16} "
                   f"{extra}".rstrip())
    return "\n".join(out)


def ps_all(rows, as_json: bool) -> int:
    """Print the runs and the jobs; 1 when Slurm did not answer (the runs are printed all the same, and nothing
    is said of jobs it could not list). A machine with no Slurm client has no Slurm jobs: its runs, a note, 0."""
    from cockpit.cli.console import ps_table
    from cockpit.cli.jobs import user_jobs
    from cockpit.cli.notices import notice
    from cockpit.slurm.arrays import run_jobs
    from cockpit.slurm.command import SlurmError, SlurmMissing

    owned = run_jobs(rows)
    missing = False
    try:
        jobs, error = user_jobs(), None
    except SlurmError as exc:
        jobs, error, missing = [], str(exc), isinstance(exc, SlurmMissing)
    if as_json:
        print(json.dumps({"runs": [{**s.to_dict(), "run_dir": str(d)} for d, s in rows],
                          "jobs": [{**j.to_dict(), "run": owner(j, owned)}
                                   for j in jobs], "error": error}, indent=2))
    else:
        if rows:
            print(ps_table(rows) + ("\n" if error is None else ""))
        if error is None:
            print(jobs_table(jobs, owned) if jobs else "no Slurm jobs of yours in the queue or its recent history")
    if missing and error is not None:
        said = "only cockpit's runs are listed" if rows else "no Slurm jobs, and no cockpit runs"
        notice(f"{error.split(' (hint')[0]}: {said} (hint: on a login node of the cluster, cockpit ps --all "
               "lists your Slurm jobs too)")
        return 0
    if error:
        notice(f"your Slurm jobs are not listed: {error}")
        return 1
    return 0
