"""The attempts of a run that relaunches itself (the job's ``recover:``): status.json's ``attempts``, one record
per start of the ranks in the same run directory, and the run's goodput.

Pure and stdlib only, beside RunStatus, which holds them. ``Attempt.to_dict`` writes exactly the keys below;
``from_dict`` checks each (RecordError names it).

Goodput is the share of the run's wall time that trained steps that were kept: steps an attempt made past the
checkpoint the next attempt resumed from were made again, so their time counts as lost, with the time to
start, to notice the failure and to restart. Each step's time is the gap between its metrics record and the
one before it in the same attempt (cockpit.train writes one per step, with its wall time); the first step
of an attempt counts with that attempt's median step time.

A run that ended and was resumed later by a person (`cockpit run --resume`, ``Attempt.resumed``) was not running
in between: that pause is neither training nor lost to a failure, as a Slurm job's accounting counts no time
while it is held or pending. It is left out of the wall time (``paused_seconds``), out of the ended attempt's
``lost_s``, and said on its own. What the stop itself cost (steps past the last checkpoint, the restart up to
the resumed attempt's first step) stays lost, to the cause "stopped".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from cockpit.run.records import NUM, RecordError, get

# requeued: Slurm started the job again itself (a node set DOWN, `scontrol requeue`): cockpit.launch.slurm.attempts
AttemptEnd = Literal["succeeded", "failure", "stall", "stopped", "requeued"]
ENDS: tuple[AttemptEnd, ...] = ("succeeded", "failure", "stall", "stopped", "requeued")


@dataclass(frozen=True)
class Attempt:
    """One attempt: 0 is the first start, each relaunch the next number (its ranks' ``COCKPIT_ATTEMPT``)."""

    attempt: int
    started: float  # wall time the supervisor started its ranks
    ended: float | None = None  # when it was over (its ranks gone); None while it runs
    failed: float | None = None  # when its trigger happened: the first rank's failure, the stall's finding
    end: str | None = None  # how it ended, one of ENDS (None while it runs)
    culprit_rank: int | None = None  # the rank that failed first, or the stall's culprit
    culprit_host: str | None = None
    cause: str | None = None  # the cause in words ("rank 1 raised RuntimeError: ... at demo.py:72")
    step: int | None = None  # the last step it reached (rank 0's metrics)
    resumed_from: int | None = None  # the checkpoint step it started from (its rank 0's "resumed from" line)
    first_step: float | None = None  # wall time of its first trained step (restart latency: from the last end)
    decision: str | None = None  # what cockpit did next: "relaunched ...", "not retried: ...", "gave up ..."
    # seconds its end cost: from its last kept step (the checkpoint the next attempt resumed from) to the next
    # attempt's first step: the steps made again, the detection, the teardown and the restart
    lost_s: float | None = None
    # started by `cockpit run --resume` after the run had ended: the time since the attempt before ended is a
    # pause, not the run's (module doc); written only when true
    resumed: bool = False

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {
            "attempt": self.attempt, "started": self.started, "ended": self.ended, "failed": self.failed,
            "end": self.end,
            "culprit": None if self.culprit_rank is None and self.culprit_host is None
            else {"rank": self.culprit_rank, "host": self.culprit_host},
            "cause": self.cause, "step": self.step, "resumed_from": self.resumed_from,
            "first_step": self.first_step, "decision": self.decision, "lost_s": self.lost_s}
        return {**d, "resumed": True} if self.resumed else d

    @classmethod
    def from_dict(cls, d: object, where: str = "") -> Attempt:
        if not isinstance(d, dict):
            raise RecordError(f"{where.rstrip(': ')}: expected an object")
        culprit = d.get("culprit")
        if culprit is not None and not isinstance(culprit, dict):
            raise RecordError(f"{where}culprit: expected an object or null")
        culprit = culprit or {}
        return cls(get(d, "attempt", (int,), where, True), get(d, "started", NUM, where, True),
                   get(d, "ended", (*NUM, None), where), get(d, "failed", (*NUM, None), where),
                   get(d, "end", (str, None), where),
                   get(culprit, "rank", (int, None), f"{where}culprit."),
                   get(culprit, "host", (str, None), f"{where}culprit."), get(d, "cause", (str, None), where),
                   get(d, "step", (int, None), where), get(d, "resumed_from", (int, None), where),
                   get(d, "first_step", (*NUM, None), where), get(d, "decision", (str, None), where),
                   get(d, "lost_s", (*NUM, None), where), bool(get(d, "resumed", (bool,), where)))


def attempts_from_list(data: object, where: str = "attempts") -> list[Attempt]:
    if not isinstance(data, list):
        raise RecordError(f"{where}: expected a list")
    return [Attempt.from_dict(a, f"{where}[{i}]: ") for i, a in enumerate(data)]


def restart_latencies(attempts: list[Attempt]) -> list[float | None]:
    """For each relaunch (attempts 1..), seconds from the previous attempt's failure (or, not known, its end; for a
    resume by a person, from its own start) to its own first step: the detection, the teardown, the start of the
    ranks and their resume."""
    out: list[float | None] = []
    for before, after in zip(attempts, attempts[1:], strict=False):
        since = before.failed if before.failed is not None else before.ended
        since = after.started if after.resumed else since  # a person's resume: from it, not from the stop
        out.append(None if since is None or after.first_step is None else round(after.first_step - since, 2))
    return out


def pauses(attempts: list[Attempt]) -> list[float]:
    """For each attempt, the seconds the run was ended before it (it was resumed by a person: ``resumed``): from
    the end of the attempt before to its start; 0.0 for every other attempt."""
    out = [0.0]
    for before, after in zip(attempts, attempts[1:], strict=False):
        gap = after.started - before.ended if after.resumed and before.ended is not None else 0.0
        out.append(round(max(gap, 0.0), 3))
    return out[:len(attempts)]


def paused_seconds(attempts: list[Attempt]) -> float:
    """The seconds a run spent ended, before a person resumed it (``pauses``, all together)."""
    return round(sum(pauses(attempts)), 3)


def goodput(attempts: list[Attempt], records: Iterable[tuple[float, int]], began: float, ended: float) -> float | None:
    """The share of ``began``..``ended``, less the pauses before a resume (``paused_seconds``), that trained kept
    steps; ``records``: rank 0's (time, step) metrics in file order. None without records (a script that writes no
    metrics) or without a wall time."""
    wall = ended - began - paused_seconds(attempts)
    by_attempt: dict[int, list[tuple[float, int]]] = {}
    for t, step in records:
        owner = next((a for a in reversed(attempts) if a.started <= t), None)
        if owner is not None:
            by_attempt.setdefault(owner.attempt, []).append((t, step))
    if wall <= 0 or not by_attempt:
        return None
    kept = 0.0
    for i, a in enumerate(attempts):
        mine = by_attempt.get(a.attempt, [])
        nxt = attempts[i + 1] if i + 1 < len(attempts) else None
        upto = None if nxt is None else _resumed(nxt, by_attempt.get(nxt.attempt, []))
        kept += _kept_time(mine, upto)
    return round(min(kept / wall, 1.0), 4)


def _resumed(a: Attempt, mine: list[tuple[float, int]]) -> int:
    """The step attempt ``a`` started from: its resume line's, else one before its first record, else 0."""
    if a.resumed_from is not None:
        return a.resumed_from
    return max(mine[0][1] - 1, 0) if mine else 0


def _kept_time(records: list[tuple[float, int]], upto: int | None) -> float:
    """Seconds of ``records`` (one attempt's) that trained steps up to ``upto`` (None: all of them)."""
    if not records:
        return 0.0
    gaps = [(t1 - t0) / max(s1 - s0, 1) for (t0, s0), (t1, s1) in zip(records, records[1:], strict=False)
            if s1 > s0]
    import statistics  # here: ps and validate read attempts, only goodput needs it (3 ms of import)

    typical = statistics.median(gaps) if gaps else 0.0
    total, last_t, last_s = 0.0, None, None
    for t, s in records:
        if upto is not None and s > upto:
            break
        if last_t is None or last_s is None or s <= last_s:
            total += typical  # the attempt's first step: its time is not measured, its typical one counts
        else:
            total += t - last_t
        last_t, last_s = t, s
    return total


def lost_seconds(attempts: list[Attempt], records: Iterable[tuple[float, int]]) -> list[float | None]:
    """For each attempt, the seconds its end cost the run (``Attempt.lost_s``): from the time it trained the step the
    next attempt resumed from (its start, where it trained none of them) to the next attempt's first step; None for
    the last attempt, or where the next one made no step."""
    recs = list(records)
    paused = pauses(attempts)
    out: list[float | None] = []
    for i, a in enumerate(attempts):
        nxt = attempts[i + 1] if i + 1 < len(attempts) else None
        if nxt is None or nxt.first_step is None:
            out.append(None)
            continue
        until = nxt.started
        mine = [(t, step) for t, step in recs if a.started <= t < until]
        upto = _resumed(nxt, [(t, step) for t, step in recs if t >= nxt.started])
        kept = [t for t, step in mine if step <= upto]
        out.append(round(nxt.first_step - (kept[-1] if kept else a.started) - paused[i + 1], 2))
    return out
