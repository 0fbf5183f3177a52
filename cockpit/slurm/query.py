"""Where Slurm jobs stand: ONE batched ``squeue`` call for every job cockpit follows, then, only for jobs that
have left the controller's memory (MinJobAge, 300 s by default), accounting (``sacct``) when the cluster has
it, else the job-completion file (JobCompType=jobcomp/filetxt) when cockpit can read it.

Why squeue first: it answers from slurmctld's memory for pending, running and recently finished jobs alike
(``--states=all``), with the pending reason, the restart count and the exit status, in one RPC for any
number of jobs. sacct asks slurmdbd, which many small clusters do not run ("Slurm accounting storage is
disabled"); ``scontrol show config`` says which of the two sources exists, so cockpit never tries a command
that cannot work. ``scontrol show job`` is not used: it reads the same memory squeue does.

Parsers are pure and tested on real output; commands run through an injected ``runner`` (cockpit.slurm.command).
Following many jobs over time, with backoff, is cockpit.slurm.tracker.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cockpit.slurm.command import RunCommand, SlurmError, last_words, run_command
from cockpit.slurm.states import lookup

SQUEUE_FIELDS = ("JobArrayID", "State", "Reason", "exit_code", "RestartCnt", "NodeList")
SACCT_FIELDS = ("JobID", "State", "ExitCode", "NodeList")
JOBCOMP_TAIL = 8 << 20  # read at most the last 8 MiB of a job-completion file: recent jobs are at its end


class SlurmEnd:
    """What a job record's Slurm state and exit say in cockpit's terms; a record gives ``slurm_state``,
    ``exit_code`` and ``signal``."""

    slurm_state: str
    exit_code: int | None
    signal: int | None

    @property
    def state(self) -> str:
        """The cockpit state (see cockpit.slurm.states)."""
        return lookup(self.slurm_state).state

    @property
    def final(self) -> bool:
        return lookup(self.slurm_state).final

    @property
    def exit_status(self) -> int:
        """One number in the shell's convention: the exit code, else 128 + signal."""
        if self.exit_code:
            return self.exit_code
        return 128 + self.signal if self.signal else 0


@dataclass(frozen=True)
class JobView(SlurmEnd):
    """One job (or array task) as Slurm last reported it."""

    job_id: str  # "123", or "123_4" for an array task
    slurm_state: str  # normalised: RUNNING, PENDING, COMPLETED, ...
    reason: str | None = None  # why it is pending or how it ended ("Priority", "NonZeroExitCode"); None: none
    exit_code: int | None = None  # the batch script's exit code (final jobs)
    signal: int | None = None  # the signal that ended the batch script, if one did
    restarts: int | None = None  # requeues so far (squeue only)
    nodes: str | None = None  # the allocation, as a hostlist
    source: str = "squeue"  # squeue | sacct | jobcomp



def _none(text: str) -> str | None:
    text = text.strip()
    return None if text in ("", "None", "(null)", "N/A") else text


def _wait_status(text: str) -> tuple[int | None, int | None]:
    """squeue's exit_code is the raw wait status: 256 -> (1, None); 9 -> (0, 9)."""
    try:
        raw = int(text)
    except ValueError:
        return None, None
    return raw >> 8, (raw & 0x7F) or None


def _colon_status(text: str) -> tuple[int | None, int | None]:
    """sacct's and jobcomp's ExitCode "1:0" -> (1, None); "0:9" -> (0, 9)."""
    code, _, sig = text.partition(":")
    try:
        return int(code), (int(sig) or None) if sig else None
    except ValueError:
        return None, None


def squeue_argv(job_ids: Iterable[str]) -> list[str]:
    bases = sorted({j.split("_")[0] for j in job_ids}, key=lambda j: (len(j), j))
    return ["squeue", "--noheader", "--array", "--states=all", f"--jobs={','.join(bases)}",
            "--Format=" + ",".join(f"{f}:|" for f in SQUEUE_FIELDS)]


def parse_squeue(text: str) -> dict[str, JobView]:
    """Output of ``squeue_argv`` -> views keyed by job id ("123", "123_4")."""
    out = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < len(SQUEUE_FIELDS):
            continue
        job_id, state, reason, status, restarts, nodes = (p.strip() for p in parts[:len(SQUEUE_FIELDS)])
        code, sig = _wait_status(status)
        out[job_id] = JobView(job_id, state.upper(), _none(reason), code, sig,
                              int(restarts) if restarts.isdigit() else None, _none(nodes), "squeue")
    return out


def sacct_argv(job_ids: Iterable[str]) -> list[str]:
    return ["sacct", "--noheader", "--parsable2", "--allocations", f"--jobs={','.join(sorted(job_ids))}",
            "--format=" + ",".join(SACCT_FIELDS)]


def parse_sacct(text: str) -> dict[str, JobView]:
    """``sacct --parsable2 --allocations --format=JobID,State,ExitCode,NodeList`` -> views (last line wins)."""
    out = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != len(SACCT_FIELDS) or not parts[0]:
            continue
        code, sig = _colon_status(parts[2])
        state = parts[1].split()[0].rstrip("+") if parts[1].strip() else "UNKNOWN"
        out[parts[0]] = JobView(parts[0], state.upper(), None, code, sig, None, _none(parts[3]), "sacct")
    return out


def parse_jobcomp(text: str, wanted: set[str]) -> dict[str, JobView]:
    """jobcomp/filetxt lines ("JobId=4 ... JobState=FAILED ... ArrayJobId=2 ArrayTaskId=1 ... ExitCode=1:0")
    -> views of the ``wanted`` ids; a later line (a later attempt of a requeued job) wins."""
    out = {}
    for line in text.splitlines():
        fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
        if "JobId" not in fields:
            continue
        array, task = fields.get("ArrayJobId"), fields.get("ArrayTaskId")
        job_id = f"{array}_{task}" if array and task and array != "0" else fields["JobId"]
        if job_id not in wanted:
            continue
        code, sig = _colon_status(fields.get("ExitCode", ""))
        out[job_id] = JobView(job_id, fields.get("JobState", "UNKNOWN").upper(), None, code, sig, None,
                              _none(fields.get("NodeList", "")), "jobcomp")
    return out


def parse_config(text: str) -> dict[str, str]:
    """``scontrol show config`` -> {"AccountingStorageType": "accounting_storage/none", ...}."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class History:
    """Where finished jobs are recorded on this cluster, from ``scontrol show config``."""

    accounting: bool  # sacct works (slurmdbd)
    jobcomp_file: str | None  # jobcomp/filetxt's file, if that is the completion plugin

    @classmethod
    def from_config(cls, config: dict[str, str]) -> History:
        accounting = config.get("AccountingStorageType", "accounting_storage/none") not in (
            "accounting_storage/none", "(null)", "")
        loc = config.get("JobCompLoc") if config.get("JobCompType") == "jobcomp/filetxt" else None
        return cls(accounting, _none(loc or ""))

    @property
    def source(self) -> str:
        return "sacct" if self.accounting else ("jobcomp" if self.jobcomp_file else "none")


def read_history(runner: RunCommand = run_command) -> History:
    r = runner(["scontrol", "show", "config"])
    if r.returncode != 0:
        raise SlurmError(f"scontrol show config exited {r.returncode}: {last_words(r.stderr)} "
                         "(hint: is slurmctld up? `scontrol ping`)")
    return History.from_config(parse_config(r.stdout))


def squeue(job_ids: Iterable[str], runner: RunCommand = run_command) -> dict[str, JobView]:
    """One squeue call for all ``job_ids``; ids Slurm no longer knows are simply absent."""
    ids = set(job_ids)
    if not ids:
        return {}
    r = runner(squeue_argv(ids))
    if r.returncode != 0:
        if "Invalid job id" in r.stderr:  # asked for one job only, and it has left the controller's memory
            return {}
        raise SlurmError(f"squeue exited {r.returncode}: {last_words(r.stderr)} (hint: `scontrol ping`)")
    views = parse_squeue(r.stdout)
    return {k: v for k, v in views.items() if k in ids or k.split("_")[0] in ids}


def finished(job_ids: Iterable[str], history: History, runner: RunCommand = run_command) -> dict[str, JobView]:
    """Jobs gone from the controller's memory, from accounting or the job-completion file."""
    ids = set(job_ids)
    if not ids:
        return {}
    if history.accounting:
        r = runner(sacct_argv(ids))
        if r.returncode != 0:
            raise SlurmError(f"sacct exited {r.returncode}: {last_words(r.stderr)}")
        return {k: v for k, v in parse_sacct(r.stdout).items() if k in ids}
    if history.jobcomp_file:
        try:
            return parse_jobcomp(_tail(Path(history.jobcomp_file), JOBCOMP_TAIL), ids)
        except OSError:
            return {}  # the file lives on the controller and is not shared here: no record
    return {}


def _tail(path: Path, limit: int) -> str:
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(max(0, size - limit))
        data = f.read()
    if size > limit:
        data = data.split(b"\n", 1)[-1]  # drop the partial first line
    return data.decode(errors="replace")


def query_jobs(job_ids: Iterable[str], runner: RunCommand = run_command,
               history: History | None = None) -> dict[str, JobView]:
    """Every job's view: one squeue call for all, then history for those squeue no longer lists.
    Ids found nowhere are absent. Raises SlurmError when squeue itself fails."""
    ids = set(job_ids)
    views = squeue(ids, runner)
    missing = {j for j in ids if j not in views}
    if missing:
        views.update(finished(missing, history or read_history(runner), runner))
    return views
