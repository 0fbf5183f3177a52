"""The attempts of a Slurm job: its first start and one per requeue, with the step training resumed from.

Read from the run directory, incrementally (a long run's logs are large and the supervisor looks often):

- the batch log: the sbatch script prints ``cockpit: start restart=N job=ID nodes=LIST ...`` at each start
  (N is SLURM_RESTART_COUNT; see cockpit.render.sbatch.START_MARK);
- rank 0's log: cockpit.train prints ``[cockpit] start rank=0 ...`` when a process starts and
  ``[cockpit] resumed from PATH step=S epoch=E batch_in_epoch=B`` after it loaded a checkpoint. The k-th
  start line of rank 0 belongs to the k-th attempt, so an attempt that found no checkpoint reads None.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from cockpit.render.sbatch import START_MARK
from cockpit.run import layout
from cockpit.run.attempts import Attempt as RunAttempt
from cockpit.run.store import tail_lines

_START = re.compile(re.escape(START_MARK) + r"(\d+) job=(\S+) nodes=(\S*)(?: .* time=(\d+))?")
_RANK0_START = "[cockpit] start rank=0 "
_RESUMED = re.compile(r"^\[cockpit\] resumed from .* step=(\d+) epoch=\d+")
# slurmstepd's line in the batch log when the job is being requeued (`scontrol requeue`, by the job itself):
# "slurmstepd-n1: error: *** JOB 6435 ON n1 CANCELLED AT 2026-11-25T17:41:34 DUE TO JOB REQUEUE ***"
REQUEUE_MARK = "DUE TO JOB REQUEUE"


@dataclass(frozen=True)
class Attempt:
    restart: int  # SLURM_RESTART_COUNT of this start: 0 for the first
    job_id: str
    nodes: str  # the allocation of this attempt (hostlist)
    resumed_step: int | None  # the checkpoint step training resumed from; None: started from scratch
    started: float | None = None  # wall time of the start (the start line's time=), None where it has none


class LineScanner:
    """The complete lines added to a file since the last call (a partial last line waits for its end)."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.partial = b""

    def new_lines(self, limit: int = 4 << 20) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                if f.seek(0, 2) < self.offset:  # truncated or replaced: start over
                    self.offset, self.partial = 0, b""
                f.seek(self.offset)
                data = f.read(limit)
        except OSError:
            return []
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        return [line.decode(errors="replace").rstrip("\r") for line in lines]


class AttemptLog:
    """Follows one job's attempts; ``read()`` returns them all so far, oldest first."""

    def __init__(self, batch_log: Path, logs_dir: Path):
        self.batch = LineScanner(batch_log)
        self.logs_dir = logs_dir
        self.rank0: dict[Path, LineScanner] = {}
        self.starts: list[tuple[int, str, str, float | None]] = []
        self.requeue_asked = False  # Slurm said, since the last start, that it is requeueing the job
        self.resumed: dict[Path, list[int | None]] = {}  # per rank-0 log: one entry per process start

    @property
    def last_restart(self) -> int:
        """SLURM_RESTART_COUNT of the latest start seen (0 before any)."""
        return self.starts[-1][0] if self.starts else 0

    def read(self) -> list[Attempt]:
        for line in self.batch.new_lines():
            m = _START.search(line)
            if m:
                self.starts.append((int(m.group(1)), m.group(2), m.group(3),
                                    float(m.group(4)) if m.group(4) else None))
                self.requeue_asked = False
            elif REQUEUE_MARK in line:
                self.requeue_asked = True
        if self.logs_dir.is_dir():
            for path in sorted(self.logs_dir.glob("rank-0.*.log"), key=_mtime):
                self._scan_rank0(path)
        steps = [s for path in self.rank0 for s in self.resumed[path]]
        return [Attempt(restart, job, nodes, steps[i] if i < len(steps) else None, started)
                for i, (restart, job, nodes, started) in enumerate(self.starts)]

    def _scan_rank0(self, path: Path) -> None:
        if path not in self.rank0:
            self.rank0[path], self.resumed[path] = LineScanner(path), []
        segments = self.resumed[path]
        for line in self.rank0[path].new_lines():
            if line.startswith(_RANK0_START):
                segments.append(None)
            elif segments and segments[-1] is None:
                m = _RESUMED.match(line)
                if m:
                    segments[-1] = int(m.group(1))


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def describe(attempts: list[Attempt]) -> str | None:
    """'requeued 2 times: restart 1 resumed at step 37, restart 2 at step 80', or None if never requeued."""
    restarts = [a for a in attempts if a.restart > 0]
    if not restarts:
        return None
    parts = [f"restart {a.restart} " + (f"resumed at step {a.resumed_step}" if a.resumed_step is not None
                                         else "started from scratch (no checkpoint)") for a in restarts]
    times = "time" if len(restarts) == 1 else "times"
    return f"requeued {len(restarts)} {times}: " + ", ".join(parts)


def attempt_start(run_dir: Path) -> float | None:
    """When the current attempt of a Slurm job began (its batch log's last start line), else None."""
    trial = run_dir.name if run_dir.name.startswith("trial-") else None
    log = (layout.agent_log(run_dir.parent, trial) if trial else layout.agent_log(run_dir, "sbatch"))
    for line in reversed(tail_lines(log, 400)):
        if START_MARK in line and " time=" in line:
            try:
                return float(line.rsplit(" time=", 1)[1].split()[0])
            except (ValueError, IndexError):
                return None
    return None


REQUEUED = "requeued by Slurm"  # an attempt's cause when Slurm itself started the job again


def with_requeues(attempts: list[RunAttempt], base: int, starts: list[Attempt], job_id: str, run_started: float,
                  ended: Callable[[int], float | None]) -> list[RunAttempt] | None:
    """The run's attempts with each start of job ``job_id`` that Slurm requeued (``starts``' restart > 0) as an
    attempt of its own, numbered as its ranks' COCKPIT_ATTEMPT is (``base``, the attempt the job's submission
    started, plus the restart: the batch script's count): the attempt before it closed as ``requeued``, why
    ``REQUEUED``. A run without recover: gets its first attempt here (from the job's first start, else
    ``run_started``). ``ended(n)``: when attempt n's ranks ended (their exit records), None where none says.
    None where nothing is new. Pure."""
    mine = [a for a in starts if a.job_id == job_id]
    known = {a.attempt for a in attempts}
    new = [a for a in mine if a.restart > 0 and base + a.restart not in known]
    if not new:
        return None
    out = list(attempts)
    if not out:
        first = next((a.started for a in mine if a.restart == 0 and a.started is not None), None)
        out.append(RunAttempt(base, first if first is not None else run_started))
    for start in sorted(new, key=lambda a: a.restart):
        number = base + start.restart
        began = start.started if start.started is not None else time.time()
        last = out[-1]
        if last.ended is None:
            end = ended(last.attempt)
            out[-1] = replace(last, ended=end if end is not None and end <= began else began, end="requeued",
                              cause=f"{REQUEUED} (SLURM_RESTART_COUNT={start.restart}, job {job_id})",
                              decision=f"{REQUEUED}: attempt {number} started on {start.nodes or '?'}")
        out.append(RunAttempt(number, began))
    return out
