"""Any Slurm job of the user, cockpit's or not: what `cockpit ps --all`, `logs JOBID`, `attach JOBID` and
`diagnose JOBID` read.

ONE squeue call answers for every job the controller still holds (pending, running, and finished within
MinJobAge, 300 s by default), with everything the commands need: name, state and reason, nodes, elapsed and
limit, array ids, and the StdOut / StdErr patterns (cockpit.slurm.filenames resolves them). Jobs the
controller has forgotten come from the cluster's history (cockpit.slurm.query.History): sacct when it has
accounting, else the jobcomp/filetxt file. Neither keeps the output paths, so for those cockpit assumes
sbatch's default (``slurm-%j.out`` / ``slurm-%A_%a.out`` in the job's WorkDir) and says it guessed.

Parsers are pure and tested on real output (tests/slurm/fixtures); commands go through an injected runner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cockpit.slurm.command import RunCommand, SlurmError, last_words, run_command
from cockpit.slurm.filenames import PatternFacts, Resolved, resolve
from cockpit.slurm.query import History, SlurmEnd, _colon_status, _none, _tail, _wait_status

SQUEUE_FIELDS = ("JobID", "JobArrayID", "ArrayJobID", "ArrayTaskID", "UserName", "State", "Reason", "NodeList",
                 "BatchHost", "TimeUsed", "TimeLimit", "exit_code", "WorkDir", "STDOUT", "STDERR", "Name")
SACCT_FIELDS = ("JobIDRaw", "JobID", "JobName", "User", "State", "ExitCode", "NodeList", "Elapsed", "Timelimit",
                "WorkDir")
HISTORY_SINCE = "now-1days"  # how far back `ps --all` lists finished jobs from accounting
_JOB_REF = re.compile(r"^(\d+)(?:_(\d+))?$")


@dataclass(frozen=True)
class UserJob(SlurmEnd):
    """One job, or one task of an array, as Slurm reports it."""

    job_id: str  # as users write it: "123", or "123_4" for an array task
    raw_id: str  # Slurm's own id (an array task has its own; %j in file names)
    name: str
    slurm_state: str  # normalised: RUNNING, PENDING, FAILED, ...
    user: str | None = None
    reason: str | None = None  # why it waits or how it ended ("Priority", "NonZeroExitCode"); None: none
    nodes: str | None = None  # hostlist of the allocation
    batch_host: str | None = None  # where the batch script runs (its output is written from there)
    elapsed: str | None = None  # as squeue prints it: "1:02", "1-02:03:04"
    time_limit: str | None = None  # "5:00", "UNLIMITED"
    exit_code: int | None = None
    signal: int | None = None
    workdir: str | None = None
    stdout: str | None = None  # the pattern Slurm keeps (absolute); None: unknown (history)
    stderr: str | None = None
    source: str = "squeue"  # squeue | sacct | jobcomp

    @property
    def array_job_id(self) -> str | None:
        return self.job_id.split("_")[0] if "_" in self.job_id else None

    @property
    def array_task_id(self) -> str | None:
        return self.job_id.split("_")[1] if "_" in self.job_id else None


    def to_dict(self) -> dict:
        return {"job_id": self.job_id, "raw_id": self.raw_id, "name": self.name, "user": self.user,
                "slurm_state": self.slurm_state, "state": self.state, "reason": self.reason, "nodes": self.nodes,
                "elapsed": self.elapsed, "time_limit": self.time_limit, "exit_code": self.exit_code,
                "signal": self.signal, "workdir": self.workdir, "stdout": self.stdout, "stderr": self.stderr,
                "source": self.source}


@dataclass(frozen=True)
class OutputFile:
    """Where one of a job's streams went."""

    stream: str  # "stdout" | "stderr" | "stdout+stderr" (one file for both, sbatch's default)
    path: Resolved
    guessed: bool  # Slurm no longer knew the pattern: sbatch's default was assumed


def _opt(text: str) -> str | None:
    """squeue's ways of saying "none" ("N/A", "n/a" for a pending job's BatchHost, "(null)") -> None."""
    return _none(text) if text.strip().lower() != "n/a" else None


def parse_job_ref(ref: str) -> str | None:
    """"123" or "123_4" -> itself; anything else (a run id, a path) -> None."""
    return ref if _JOB_REF.match(ref.strip()) else None


def output_files(job: UserJob) -> list[OutputFile]:
    """The job's stdout and stderr files, resolved; one entry when both go to the same file."""
    facts = PatternFacts(job.raw_id, job.array_job_id, job.array_task_id, job.user, job.name)
    guessed = job.stdout is None
    out = job.stdout or _default_pattern(job)
    err = job.stderr or out
    if out == err:
        return [OutputFile("stdout+stderr", resolve(out, facts), guessed)]
    return [OutputFile("stdout", resolve(out, facts), guessed), OutputFile("stderr", resolve(err, facts), guessed)]


def _default_pattern(job: UserJob) -> str:
    name = "slurm-%A_%a.out" if job.array_job_id else "slurm-%j.out"
    return f"{job.workdir.rstrip('/')}/{name}" if job.workdir else name


# -- squeue ---------------------------------------------------------------------------------------------------
def squeue_argv(user: str | None = None, jobs: list[str] | None = None) -> list[str]:
    """Every job of ``user`` (default: ``--me``), or the named ``jobs``, with every array task on its own line."""
    who = [f"--jobs={','.join(jobs)}"] if jobs else ([f"--user={user}"] if user else ["--me"])
    return ["squeue", "--noheader", "--array", "--states=all", *who,
            "--Format=" + ",".join(f"{f}:|" for f in SQUEUE_FIELDS)]


def parse_squeue(text: str) -> list[UserJob]:
    """Output of ``squeue_argv`` -> one record per job or array task, in squeue's order. The name is the last
    field, so a ``|`` in a job name stays in the name."""
    out = []
    n = len(SQUEUE_FIELDS)
    for line in text.splitlines():
        parts = line.rstrip("\n").split("|")
        if len(parts) < n:
            continue
        f = dict(zip(SQUEUE_FIELDS[:-1], (p.strip() for p in parts[:n - 1]), strict=True))
        name = "|".join(parts[n - 1:]).rstrip("|").strip()
        code, sig = _wait_status(f["exit_code"])
        out.append(UserJob(f["JobArrayID"], f["JobID"], name, f["State"].upper(), _opt(f["UserName"]),
                           _opt(f["Reason"]), _opt(f["NodeList"]), _opt(f["BatchHost"]), _opt(f["TimeUsed"]),
                           _opt(f["TimeLimit"]), code, sig, _opt(f["WorkDir"]), _opt(f["STDOUT"]),
                           _opt(f["STDERR"]), "squeue"))
    return out


# -- history: sacct or jobcomp --------------------------------------------------------------------------------
def sacct_argv(user: str | None = None, jobs: list[str] | None = None) -> list[str]:
    who = [f"--jobs={','.join(jobs)}"] if jobs else [*([f"--user={user}"] if user else []),
                                                    f"--starttime={HISTORY_SINCE}"]
    return ["sacct", "--noheader", "--parsable2", "--allocations", *who, "--format=" + ",".join(SACCT_FIELDS)]


def parse_sacct(text: str) -> list[UserJob]:
    out = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != len(SACCT_FIELDS) or not parts[0]:
            continue
        f = dict(zip(SACCT_FIELDS, parts, strict=True))
        code, sig = _colon_status(f["ExitCode"])
        state = f["State"].split()[0].rstrip("+").upper() if f["State"].strip() else "UNKNOWN"
        out.append(UserJob(f["JobID"], f["JobIDRaw"], f["JobName"], state, _none(f["User"]), None,
                           _none(f["NodeList"]), None, _none(f["Elapsed"]), _none(f["Timelimit"]), code, sig,
                           _none(f["WorkDir"]), None, None, "sacct"))
    return out


def parse_jobcomp(text: str, user: str | None = None, ids: set[str] | None = None) -> list[UserJob]:
    """jobcomp/filetxt lines -> records of ``user``'s jobs (or of the ``ids``: "123", "123_4", or an array's
    "123" for all its tasks); a later line (a later attempt of a requeued job) replaces an earlier one."""
    out: dict[str, UserJob] = {}
    for line in text.splitlines():
        f = dict(word.split("=", 1) for word in line.split() if "=" in word)
        if "JobId" not in f:
            continue
        array, task = f.get("ArrayJobId"), f.get("ArrayTaskId")
        job_id = f"{array}_{task}" if array and task and array != "0" else f["JobId"]
        owner = f.get("UserId", "").split("(")[0] or None
        if ids is not None and not ({job_id, f["JobId"], job_id.split("_")[0]} & ids):
            continue
        if ids is None and user is not None and owner != user:
            continue
        code, sig = _colon_status(f.get("ExitCode", ""))
        out[job_id] = UserJob(job_id, f["JobId"], f.get("Name", ""), f.get("JobState", "UNKNOWN").upper(), owner,
                              None, _none(f.get("NodeList", "")), None, _elapsed(f.get("StartTime"), f.get("EndTime")),
                              _none(f.get("TimeLimit", "")), code, sig, _none(f.get("WorkDir", "")), None, None,
                              "jobcomp")
    return list(out.values())


def _elapsed(start: str | None, end: str | None) -> str | None:
    """squeue's spelling of end - start ("0:03", "1:02:03", "1-00:00:00"), from jobcomp's ISO times."""
    from datetime import datetime

    try:
        secs = int((datetime.fromisoformat(end or "") - datetime.fromisoformat(start or "")).total_seconds())
    except ValueError:
        return None
    days, rest = divmod(max(secs, 0), 86400)
    hours, rest = divmod(rest, 3600)
    mins, secs = divmod(rest, 60)
    hms = f"{hours}:{mins:02d}:{secs:02d}" if hours or days else f"{mins}:{secs:02d}"
    return f"{days}-{hours:02d}:{mins:02d}:{secs:02d}" if days else hms


# -- IO through the runner ------------------------------------------------------------------------------------
def list_jobs(history: History | None, user: str | None = None, runner: RunCommand = run_command) -> list[UserJob]:
    """Every job of the user: squeue's (one call), then the history's that squeue no longer lists. ``history``
    None: squeue only. Raises SlurmError when squeue fails."""
    live = _run_squeue(squeue_argv(user), runner)
    seen = {j.job_id for j in live}
    return live + [j for j in _history(history, user, None, runner) if j.job_id not in seen]


def find_jobs(ref: str, history: History | None, runner: RunCommand = run_command) -> list[UserJob]:
    """The job ``ref`` names ("123" or "123_4"); every task for an array's id. [] when Slurm knows none."""
    base = ref.split("_")[0]
    found = [j for j in _run_squeue(squeue_argv(jobs=[base]), runner) if _matches(j, ref)]
    if not found:
        found = [j for j in _history(history, None, {ref}, runner) if _matches(j, ref)]
    return sorted(found, key=_order)


def _order(job: UserJob) -> tuple[int, int]:
    """Array tasks by task id (squeue lists the task that kept the array's id last)."""
    task = job.array_task_id
    return int(job.job_id.split("_")[0]), int(task) if task and task.isdigit() else -1


def _matches(job: UserJob, ref: str) -> bool:
    return ref in (job.job_id, job.raw_id) or ("_" not in ref and job.array_job_id == ref)


def _run_squeue(argv: list[str], runner: RunCommand) -> list[UserJob]:
    r = runner(argv)
    if r.returncode != 0:
        if "Invalid job id" in r.stderr:  # asked for one job, and the controller has forgotten it
            return []
        raise SlurmError(f"squeue exited {r.returncode}: {last_words(r.stderr)} (hint: is slurmctld up? "
                         "`scontrol ping`)")
    return parse_squeue(r.stdout)


def _history(history: History | None, user: str | None, ids: set[str] | None, runner: RunCommand) -> list[UserJob]:
    if history is None:
        return []
    if history.accounting:
        r = runner(sacct_argv(user, sorted(ids) if ids else None))
        if r.returncode != 0:
            raise SlurmError(f"sacct exited {r.returncode}: {last_words(r.stderr)}")
        return parse_sacct(r.stdout)
    if history.jobcomp_file:
        from pathlib import Path

        from cockpit.slurm.query import JOBCOMP_TAIL

        try:
            return parse_jobcomp(_tail(Path(history.jobcomp_file), JOBCOMP_TAIL), user, ids)
        except OSError:
            return []  # the file lives on the controller and is not shared here
    return []
