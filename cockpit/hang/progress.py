"""Per-rank progress and the verdicts drawn from it: stalled, stopped, straggler. Pure: samples in (read by
cockpit.hang.gather), verdicts out; time is an argument, so every rule is tested with plain numbers.

Progress is new output in a rank's log or a new step in its metrics. A run is **stalled** when no rank made
progress for ``stall_after`` seconds while its processes live; the clock starts at the first look at a
started rank, so a
quiet start (model load, compile, first batch) shorter than ``stall_after`` is never flagged. A rank whose
process is stopped (state T) is reported at once.

**Stragglers.** In synchronous data parallelism every rank's step time converges to the slowest rank's, so
step cadence cannot name the straggler: the fast ranks spend the difference waiting inside the collective,
the slow one hardly waits. The rank hook reports, per rank, the seconds spent inside collectives (and inside
backward under DDP). Over a sliding window, the straggler is the rank whose wait share is far below the
others' while they wait a real share of their time; it must hold for ``confirm`` looks in a row to be named,
and fail as many in a row to be cleared (no flapping).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RankSample:
    """What was read about one rank at one look."""

    rank: int
    host: str
    log_size: int | None = None
    log_mtime: float | None = None
    step: int | None = None  # cockpit.train's metrics, where present
    state: str | None = None  # "running" | "stopped" | "exited" | None (cannot be seen from here)
    beat: dict | None = None  # the rank hook's last beat: {"t", "sync", "n", "in", "since", "ddp", ...}


@dataclass(frozen=True)
class Straggler:
    rank: int
    host: str
    compute_ms: float  # its time outside collectives per sync point
    others_wait_ms: float  # the others' median wait per sync point
    wait_share: float  # its share of time spent waiting
    others_share: float


@dataclass
class Verdict:
    ranks: dict[int, dict] = field(default_factory=dict)  # rank -> progress record (status.json)
    quiet: float = 0.0  # seconds since any rank made progress
    stalled: bool = False
    stopped: tuple[int, ...] = ()  # ranks whose process is stopped or has stopped beating
    straggler: Straggler | None = None


@dataclass
class _Rank:
    size: int | None = None
    step: int | None = None
    last_output: float | None = None
    steps: deque = field(default_factory=lambda: deque(maxlen=64))  # (t, step)
    beats: deque = field(default_factory=lambda: deque(maxlen=64))  # (t, sync seconds, sync count)


class Monitor:
    """Feed it a look at every rank now and then; it keeps the little history the verdicts need."""

    def __init__(self, stall_after: float, *, window: float = 10.0, confirm: int = 3, beat_timeout: float = 10.0,
                 min_wait_share: float = 0.15, ratio: float = 3.0):
        self.stall_after = stall_after
        self.window, self.confirm, self.beat_timeout = window, confirm, beat_timeout
        self.min_wait_share, self.ratio = min_wait_share, ratio
        self.ranks: dict[int, _Rank] = {}
        self.last_progress: float | None = None
        self.candidate: int | None = None
        self.streak = 0  # looks in a row the candidate held (or, once named, failed)
        self.named: Straggler | None = None

    def look(self, now: float, samples: list[RankSample]) -> Verdict:
        verdict = Verdict()
        if not samples:  # no rank has started (queued, in rendezvous): nothing can stall yet
            return verdict
        if self.last_progress is None:
            self.last_progress = now
        alive = False
        for s in samples:
            r = self.ranks.setdefault(s.rank, _Rank())
            grew = s.log_size is not None and s.log_size != r.size and (r.size is not None or s.log_size > 0)
            if grew or (s.step is not None and s.step != r.step):
                self.last_progress = now
                r.last_output = (s.log_mtime or now) if grew else r.last_output
            r.size, r.step = s.log_size, s.step
            beat = s.beat or {}
            if "t" in beat and (not r.beats or beat["t"] > r.beats[-1][0]):
                r.beats.append((float(beat["t"]), _waited(beat), int(beat.get("n", 0))))
            step = s.step if s.step is not None else beat.get("n")
            if step is not None and (not r.steps or r.steps[-1][1] != step):
                r.steps.append((now, step))
            state = s.state
            if state != "exited" and beat and now - float(beat["t"]) > self.beat_timeout and state != "stopped":
                state = "not responding" if state is None else state
            if state in ("stopped", "not responding"):
                verdict.stopped += (s.rank,)
            alive = alive or state != "exited"
            verdict.ranks[s.rank] = {
                "host": s.host, "state": state or "unknown", "last_output": r.last_output,
                "step": step, "step_source": "metrics" if s.step is not None else ("syncs" if step is not None
                                                                                   else None),
                "rate": _rate(r.steps, now, self.window), "wait": _share(r.beats, now, self.window),
                "in": beat.get("in"), "in_since": beat.get("since"), "flag": None}
        verdict.quiet = now - self.last_progress
        verdict.stalled = alive and self.stall_after > 0 and verdict.quiet >= self.stall_after
        verdict.straggler = self._straggler(now, samples)
        for rank in verdict.stopped:
            verdict.ranks[rank]["flag"] = "stopped"
        if verdict.stalled:
            for rec in verdict.ranks.values():
                rec["flag"] = rec["flag"] or "stalled"
        if verdict.straggler is not None and not verdict.stalled:
            verdict.ranks[verdict.straggler.rank]["flag"] = "straggler"
        return verdict

    def _straggler(self, now: float, samples: list[RankSample]) -> Straggler | None:
        seen = self._candidate(now, {s.rank: s.host for s in samples})
        if self.named is not None:  # named: cleared only after `confirm` looks without it
            held = seen is not None and seen.rank == self.named.rank
            self.streak = 0 if held else self.streak + 1
            if held:
                self.named = seen
            elif self.streak >= self.confirm:
                self.named, self.streak, self.candidate = None, 0, None
            return self.named
        if seen is None:
            self.candidate, self.streak = None, 0
            return None
        self.streak = self.streak + 1 if seen.rank == self.candidate else 1
        self.candidate = seen.rank
        if self.streak >= self.confirm:
            self.named, self.streak = seen, 0
        return self.named

    def _candidate(self, now: float, hosts: dict[int, str]) -> Straggler | None:
        stats = {}
        for rank, r in self.ranks.items():
            d = _delta(r.beats, now, self.window)
            if d is None or d[2] < 5 or d[0] < self.window / 2:  # too little sustained stepping to judge
                return None
            if _since_last_sync(r.beats) > max(2.0, 2 * d[0] / d[2]):
                return None  # a rank stopped syncing: a hang in the making, not a straggler
            stats[rank] = d
        if len(stats) < 2:
            return None
        shares = {rank: sync / wall for rank, (wall, sync, _) in stats.items()}
        slow = min(shares, key=shares.get)
        others = sorted(v for k, v in shares.items() if k != slow)
        median = others[len(others) // 2]
        if median < self.min_wait_share or shares[slow] * self.ratio > median:
            return None
        wall, sync, n = stats[slow]
        waits = sorted(stats[k][1] / stats[k][2] for k in stats if k != slow)
        return Straggler(slow, hosts.get(slow, "?"), 1000 * (wall - sync) / n, 1000 * waits[len(waits) // 2],
                         round(shares[slow], 3), round(median, 3))


def _waited(beat: dict) -> float:
    """Seconds in collectives so far, the one the rank is inside now included."""
    inside = float(beat["t"]) - float(beat["since"]) if beat.get("in") and beat.get("since") else 0.0
    return float(beat.get("sync", 0.0)) + max(0.0, inside)


def _window(points: deque, now: float, window: float) -> tuple | None:
    inside = [p for p in points if p[0] >= now - window - 1e-9]
    if len(inside) < 2:
        return None
    return inside[0], inside[-1]


def _rate(points: deque, now: float, window: float) -> float | None:
    ends = _window(points, now, window)
    if ends is None or ends[1][0] <= ends[0][0]:
        return None
    return round((ends[1][1] - ends[0][1]) / (ends[1][0] - ends[0][0]), 3)


def _delta(beats: deque, now: float, window: float) -> tuple[float, float, int] | None:
    """(wall seconds, seconds in collectives, sync points) over the window."""
    ends = _window(beats, now, window)
    if ends is None:
        return None
    (t0, s0, n0), (t1, s1, n1) = ends
    if t1 <= t0:
        return None
    return t1 - t0, max(0.0, s1 - s0), n1 - n0


def _since_last_sync(beats: deque) -> float:
    """Seconds from this rank's last new sync point to its last beat."""
    t_last, _, n_last = beats[-1]
    for t, _, n in reversed(beats):
        if n != n_last:
            return t_last - t
    return t_last - beats[0][0]


def _share(beats: deque, now: float, window: float) -> float | None:
    d = _delta(beats, now, window)
    return None if d is None else round(min(1.0, d[1] / d[0]), 3)
