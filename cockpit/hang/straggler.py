"""The straggler rule. Pure: per-rank beats in, a verdict out; time is an argument.

In synchronous data parallelism every rank's step time converges to the slowest rank's, so step cadence
cannot name the straggler: the fast ranks spend the difference waiting inside the collective, the slow one
hardly waits. The rank hook reports, per rank, the seconds spent inside collectives (and inside backward
under DDP). Over a sliding window, the straggler is the rank whose wait share is far below the others' while
they wait a real share of their time, each share the median over the rank's beat-to-beat intervals (a slow
rank is slow at every step; a blip fills a few intervals); it must hold for ``confirm`` looks in a row to be
named, and fail as many in a row to be cleared (no flapping).

**A pause is not straggling.** The window never reaches back past a pause: the start (no collective yet),
a rank-0-only evaluation or a checkpoint while the others wait, a stall. Over such a stretch the rank that
works alone waits least while the others wait most, which is a pause, not a slow rank; a window that holds
part of one would name it. So each rank's beats mark where its last pause ended (its sync count stood still
for longer than a few of its own steps), and the window starts after the latest such end of any rank. The
figures a straggler finding gives (its own work per step, the others' wait per step) come from that same
window, so the first live report and the last one measure the same thing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

# A sync count standing still this long, and PAUSE_STEPS of the rank's own steps, is a pause: with beats a second
# apart and steps faster than that, one beat without a new collective is one.
PAUSE_MIN_S = 2.0
PAUSE_STEPS = 2.0


@dataclass(frozen=True)
class Straggler:
    rank: int
    host: str
    compute_ms: float  # its time outside collectives per sync point
    others_wait_ms: float  # the others' median wait per sync point
    wait_share: float  # its share of time spent waiting
    others_share: float


class Beats:
    """One rank's recent beats, (t, seconds waited in collectives, sync count), and where its last pause ended."""

    def __init__(self, keep: int = 64):
        self.points: deque = deque(maxlen=keep)
        self.last_change: float | None = None  # beat time of the last new sync count
        self.pause_end: float | None = None  # beat time at which the sync count moved again after a pause
        self.intervals: deque = deque(maxlen=16)  # seconds between sync count changes, recent

    def add(self, t: float, waited: float, n: int) -> None:
        if self.points and t <= self.points[-1][0]:
            return
        if not self.points:
            self.last_change = t
        elif n != self.points[-1][2]:
            gap = t - (self.last_change if self.last_change is not None else t)
            if gap >= self.pause_limit() - 0.05:  # (beats come a second apart, give or take a few ms)
                self.pause_end = t
            self.intervals.append(gap)  # pauses too: the lower median below is the rank's own step
            self.last_change = t
        self.points.append((t, waited, n))

    def pause_limit(self) -> float:
        typical = sorted(self.intervals)[(len(self.intervals) - 1) // 2] if self.intervals else 0.0
        return max(PAUSE_MIN_S, PAUSE_STEPS * typical)

    def standing(self) -> float:
        """Seconds from the last new sync count to the last beat (a pause in the making)."""
        if not self.points or self.last_change is None:
            return 0.0
        return self.points[-1][0] - self.last_change


class Rule:
    """Names the straggler from every rank's Beats; keeps the confirm/clear streaks between looks."""

    def __init__(self, window: float = 10.0, confirm: int = 3, min_wait_share: float = 0.15, ratio: float = 3.0):
        self.window, self.confirm = window, confirm
        self.min_wait_share, self.ratio = min_wait_share, ratio
        self.candidate: int | None = None
        self.streak = 0  # looks in a row the candidate held (or, once named, failed)
        self.named: Straggler | None = None

    def judge(self, now: float, beats: dict[int, Beats], hosts: dict[int, str],
              pausing: bool = False) -> Straggler | None:
        """``pausing``: the run is starting or stalled: no rank is straggling now."""
        seen = None if pausing else self.candidate_now(now, beats, hosts)
        if self.named is not None:  # named: cleared only after `confirm` looks without it
            held = seen is not None and seen.rank == self.named.rank
            self.streak = 0 if held else self.streak + 1
            if held:
                self.named = seen
            elif self.streak >= self.confirm or pausing:
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

    def candidate_now(self, now: float, beats: dict[int, Beats], hosts: dict[int, str]) -> Straggler | None:
        """The rank that waits least while the others wait for it, over the window since the last pause.

        Each rank's figures are medians over its beat-to-beat intervals, not totals over the window: a
        straggler is slow at every step, so it shows in most intervals, while a short pause that the pause
        rule let through (one rank evaluating 2 s while the others wait) fills only a few of them."""
        if len(beats) < 2:
            return None
        cut = max((b.pause_end for b in beats.values() if b.pause_end is not None), default=None)
        start = now - self.window if cut is None else max(now - self.window, cut)
        stats = {}
        for rank, b in beats.items():
            steps = intervals(b.points, start)
            wall, syncs = sum(i[0] for i in steps), sum(i[2] for i in steps)
            if len(steps) < 3 or syncs < 5 or wall < self.window / 2:  # too little sustained stepping to judge
                return None
            if b.standing() > max(PAUSE_MIN_S, 2 * wall / syncs):
                return None  # a rank stopped syncing: a pause or a hang in the making, not a straggler
            stats[rank] = steps
        # an interval without a collective completed is a rank waiting (or working) through it: part of a
        # pause, or of steps slower than a beat; the straggler shows in the intervals where the ranks step
        shares = {rank: _median([min(1.0, w / t) for t, w, n in steps if n > 0]) for rank, steps in stats.items()}
        slow = min(shares, key=lambda r: (shares[r], r))
        median = _median([v for k, v in shares.items() if k != slow])
        if median < self.min_wait_share or shares[slow] * self.ratio > median:
            return None
        own = _median([(t - w) / n for t, w, n in stats[slow] if n > 0])
        waits = _median([_median([w / n for t, w, n in stats[k] if n > 0]) for k in stats if k != slow])
        return Straggler(slow, hosts.get(slow, "?"), 1000 * own, 1000 * waits, round(shares[slow], 3), round(median, 3))


def intervals(points: deque, start: float) -> list[tuple[float, float, int]]:
    """(seconds, seconds in collectives, sync points) of each beat-to-beat interval at or after ``start``."""
    inside = since(points, start)
    return [(t1 - t0, max(0.0, s1 - s0), n1 - n0)
            for (t0, s0, n0), (t1, s1, n1) in zip(inside, inside[1:], strict=False) if t1 > t0]


def since(points: Sequence[tuple], start: float) -> list:
    """The points (time first, in ascending time) at or after ``start``, found from the end: a window holds a
    few of the 64 kept, and every rank's are looked at each second."""
    out = []
    for p in reversed(points):
        if p[0] < start - 1e-9:
            break
        out.append(p)
    out.reverse()
    return out


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def delta(points: deque, start: float) -> tuple[float, float, int] | None:
    """(wall seconds, seconds in collectives, sync points) between the first beat at or after ``start`` and
    the last one."""
    inside = since(points, start)
    if len(inside) < 2:
        return None
    (t0, s0, n0), (t1, s1, n1) = inside[0], inside[-1]
    if t1 <= t0:
        return None
    return t1 - t0, max(0.0, s1 - s0), n1 - n0


def share(points: deque, now: float, window: float) -> float | None:
    """The share of the last ``window`` seconds a rank spent waiting in collectives."""
    d = delta(points, now - window)
    return None if d is None else round(min(1.0, d[1] / d[0]), 3)
