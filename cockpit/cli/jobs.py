"""`cockpit ps --all`, `logs JOBID [-f]`, `attach JOBID`, `diagnose JOBID` for any Slurm job of the user, one
cockpit did not start included: the files its batch script wrote (cockpit.slurm.jobs finds and resolves them),
followed until the job ends, then its end (state, exit code) as for cockpit's own runs.

A path Slurm reports may be on the node's local disk (``--output=/tmp/...``): cockpit then says which file,
where it was written, and how to read it, and exits 1. Lines on stdout, notices on stderr.
"""

from __future__ import annotations

import getpass
import glob
import sys
import time
from pathlib import Path

from cockpit.cli.notices import Output, notice
from cockpit.slurm.command import SlurmError
from cockpit.slurm.jobs import OutputFile, UserJob, find_jobs, list_jobs, output_files
from cockpit.slurm.query import History, read_history

LOOK_EVERY = (1.0, 5.0)  # seconds between squeue calls while following: from the first, growing to the second


class JobError(Exception):
    """A job cockpit cannot show (unknown id, Slurm down): one clear line, exit 2."""


def _history() -> History:
    try:
        return read_history()
    except SlurmError as exc:
        raise JobError(str(exc)) from None


def find(job_id: str) -> list[UserJob]:
    """The job (every task of an array named by its id); JobError when Slurm knows none."""
    history = _history()
    try:
        found = find_jobs(job_id, history)
    except SlurmError as exc:
        raise JobError(str(exc)) from None
    if not found:
        where = {"sacct": "accounting (sacct)", "jobcomp": f"the job completion log {history.jobcomp_file}",
                 "none": "no history (this cluster keeps none)"}[history.source]
        raise JobError(f"Slurm job {job_id}: neither squeue nor {where} knows it (hint: cockpit ps --all "
                       "lists your jobs; the controller forgets finished jobs after MinJobAge)")
    return found


def user_jobs() -> list[UserJob]:
    """Every job of this user: one squeue call, plus the cluster's history of finished ones."""
    return list_jobs(read_history(), getpass.getuser())


# -- files ------------------------------------------------------------------------------------------------------
def locate(f: OutputFile) -> Path | None:
    """The file on disk: the resolved path, or the one file its wildcard (%N, %s) matches; None: not here."""
    if not f.path.wildcard:
        return Path(f.path.path)
    hits = sorted(glob.glob(glob.escape(f.path.path).replace(glob.escape("*"), "*")))
    return Path(hits[-1]) if hits else None


def unreadable(job: UserJob, f: OutputFile, why: str) -> str:
    """What, where, and a hint, for a file of a job that cannot be read from here."""
    host = job.batch_host or job.nodes or "its node"
    guess = (" (cockpit assumed sbatch's default name: Slurm keeps no output path for a job it has forgotten)"
             if f.guessed else "")
    return (f"job {job.job_id}: its {f.stream} {f.path.path} cannot be read here: {why}{guess}; the batch "
            f"script ran on {host} (hint: a path on the node's local disk is not seen from this machine: "
            f"`ssh {host} cat {f.path.path}`, or submit with --output on a shared file system)")


def _why(path: Path | None) -> str:
    if path is None:
        return "no file matches it"
    try:
        with open(path, "rb"):
            return ""
    except OSError as exc:
        return exc.strerror or str(exc)


def _label(job: UserJob, f: OutputFile, many: bool) -> str:
    return f"[{job.job_id}{'' if f.stream == 'stdout+stderr' else ':' + f.stream[3:]}] " if many else ""


def _files(jobs: list[UserJob]) -> list[tuple[UserJob, OutputFile]]:
    return [(j, f) for j in jobs for f in output_files(j)]


# -- logs JOBID -------------------------------------------------------------------------------------------------
def cmd_logs(job_id: str, lines: int | None) -> int:
    """Print the job's files; 1 when a file that should exist cannot be read."""
    from cockpit.logs.bounded import printable, tail

    jobs = find(job_id)
    files = _files(jobs)
    many, rc = len(files) > 1, 0
    for job, f in files:
        if job.state == "starting":
            notice(f"job {job.job_id} has not started ({job.slurm_state}: {job.reason or 'no reason given'}): "
                   "no output yet")
            continue
        path = locate(f)
        why = _why(path)
        if why or path is None:  # no path: why says so
            notice(unreadable(job, f, why))
            rc = 1
            continue
        try:  # bounded: the last lines read from the end, or the whole file streamed (cockpit.logs.bounded)
            if lines is not None:  # -n 0: nothing, as tail -n 0
                print("".join(f"{_label(job, f, many)}{line}\n" for line in tail(path, lines, follow=True)), end="")
                continue
            sys.stdout.flush()
            for block in printable(path, _label(job, f, many), follow=True):
                sys.stdout.buffer.write(block)
        except OSError as exc:
            notice(unreadable(job, f, exc.strerror or str(exc)))
            rc = 1
    return rc


# -- logs -f JOBID / attach JOBID -------------------------------------------------------------------------------
def end_line(job: UserJob) -> str:
    reason = f", {job.reason}" if job.reason and job.reason != "None" else ""
    return (f"job {job.job_id} ({job.name}) ended: {job.slurm_state}, exit code {job.exit_status}{reason}"
            f"{f' on {job.nodes}' if job.nodes else ''}")


def follow(job_id: str, from_start: bool = True, banner: bool = False, last_lines: int | None = None) -> int:
    """Stream the job's files until every task has ended, then print each end; exit with the job's code
    (the first non-zero of an array's tasks). Ctrl-C detaches (130): the job goes on."""
    jobs = find(job_id)
    if banner:
        live = [j for j in jobs if not j.final]
        if not live:
            for job in jobs:
                print(end_line(job))
            return _code(jobs)
        notice(f"attached to job {job_id} ({', '.join(sorted({j.slurm_state for j in live}))}); "
               "new lines follow; Ctrl-C detaches")
    try:
        return _follow(job_id, jobs, from_start, last_lines)
    except KeyboardInterrupt:
        notice(f"detached; job {job_id} goes on (cockpit attach {job_id} / scancel {job_id})")
        return 130


def _follow(job_id: str, jobs: list[UserJob], from_start: bool, last_lines: int | None = None) -> int:
    from cockpit.logs.filetail import FileFollower

    out = Output()
    many = len(_files(jobs)) > 1
    followers: dict[tuple[str, str], FileFollower] = {}
    told: set[tuple[str, str]] = set()
    fresh_start = {j.job_id for j in jobs if j.state == "starting"}  # its whole output is new
    wait, next_look = LOOK_EVERY[0], time.monotonic() + LOOK_EVERY[0]
    while True:
        done = all(j.final for j in jobs)
        for job, f in _files(jobs):
            key = (job.job_id, f.stream)
            if key not in followers and job.state != "starting" and (path := locate(f)) is not None:
                whole = job.job_id in fresh_start  # its whole output is new: no tail of it
                followers[key] = FileFollower(key, path, from_start=from_start or whole,
                                              last_lines=None if whole else last_lines)
            if key in followers:
                got = followers[key].poll()
                if done:
                    followers[key].flush(got)
                out.write("".join(f"{_label(job, f, many)}{line.text}\n" for line in got))
            elif job.state == "running" and key not in told and f.path.wildcard is False:
                told.add(key)
                notice(f"waiting for {f.path.path} (job {job.job_id} runs on {job.batch_host or job.nodes}: "
                       "a path on the node's local disk never shows here)")
        if done:
            break
        time.sleep(0.2)
        if time.monotonic() >= next_look:
            fresh = _refresh(job_id, jobs)
            wait = LOOK_EVERY[0] if fresh != jobs else min(wait * 1.5, LOOK_EVERY[1])
            jobs, next_look = fresh, time.monotonic() + wait
    for follower in followers.values():
        follower.close()
    rc = 0
    for job, f in _files(jobs):
        if (job.job_id, f.stream) not in followers and job.state != "starting":
            notice(unreadable(job, f, _why(locate(f)) or "it appeared too late"))
            rc = 1
    for job in jobs:
        out.write(end_line(job) + "\n")
    return _code(jobs) or rc


def _refresh(job_id: str, jobs: list[UserJob]) -> list[UserJob]:
    try:
        return find_jobs(job_id, _history()) or jobs
    except SlurmError as exc:
        notice(f"{exc} (still following; asking again)")
        return jobs


def _code(jobs: list[UserJob]) -> int:
    return next((j.exit_status for j in sorted(jobs, key=lambda j: j.job_id) if j.exit_status), 0)


# -- diagnose JOBID ---------------------------------------------------------------------------------------------
def sources(job_id: str) -> list[tuple[str, str | None, int | None]]:
    """The job's readable files as diagnose sources (path, host, rank None); JobError when none is."""
    found: list[tuple[str, str | None, int | None]] = []
    problems: list[str] = []
    for job, f in _files(find(job_id)):
        path = locate(f)
        why = _why(path) if job.state != "starting" else "the job has not started"
        if why:
            problems.append(unreadable(job, f, why))
        else:
            found.append((str(path), job.batch_host, None))
    if not found:
        raise JobError(problems[0] if problems else f"job {job_id}: no output file")
    for line in problems:
        notice(line)
    return found
