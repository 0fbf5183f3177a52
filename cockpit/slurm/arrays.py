"""How `cockpit ps --all` and the TUI's Runs screen show the user's Slurm jobs: an array as one row (its tasks
counted by state, so a 1,000-task array stays one line), and which cockpit run submitted which job. Pure."""

from __future__ import annotations

from collections import Counter

from cockpit.slurm.jobs import UserJob

# Which state an array's row shows: the first of these any task is in (what still moves comes first).
ROW_STATE = ("RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "PENDING", "REQUEUED", "TIMEOUT", "OUT_OF_MEMORY",
             "NODE_FAIL", "FAILED", "CANCELLED", "COMPLETED")


def group(jobs: list[UserJob]) -> list[tuple[UserJob, list[UserJob]]]:
    """(the row's job, the array's tasks) per row, in first-seen order; a plain job has no tasks."""
    rows: dict[str, list[UserJob]] = {}
    for job in jobs:
        rows.setdefault(job.array_job_id or job.job_id, []).append(job)
    out: list[tuple[UserJob, list[UserJob]]] = []
    for members in rows.values():
        if len(members) == 1 and members[0].array_job_id is None:
            out.append((members[0], []))
            continue
        states = {j.slurm_state for j in members}
        state = next((s for s in ROW_STATE if s in states), sorted(states)[0])
        lead = next(j for j in members if j.slurm_state == state)
        out.append((lead, sorted(members, key=lambda j: int(j.array_task_id or 0))))
    return out


def tasks_summary(tasks: list[UserJob]) -> str:
    counts = Counter(j.slurm_state for j in tasks)
    return f"{len(tasks)} tasks: " + ", ".join(f"{n} {s.lower()}" for s, n in counts.most_common())


def run_jobs(rows) -> dict[str, str]:
    """Slurm job id -> the id of the cockpit run that submitted it, from (run_dir, RunStatus) rows: every job id
    a run recorded, each task ("123_4") and the array as a whole ("123")."""
    owned = {}
    for _, status in rows:
        for node in status.nodes:
            job = node.slurm
            for job_id in (job.job_id, job.array_job_id) if job is not None else ():
                if job_id:
                    owned[job_id] = status.run_id
    return owned


def owner(job: UserJob, owned: dict[str, str]) -> str | None:
    return owned.get(job.job_id) or owned.get(job.array_job_id or "")
