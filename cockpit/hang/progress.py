"""Per-rank progress and the verdicts drawn from it: starting, stalled, stopped, straggler. Pure: samples in
(read by cockpit.hang.gather), verdicts out; time is an argument, so every rule is tested with plain numbers.

**Progress** is new output in a rank's log, a new step in its metrics, or a collective it completed (the
rank hook's sync count). A rank whose process is stopped (state T) is reported at once.

**Two phases.** A run is *starting* until some rank has completed a step or a collective: imports, loading,
compiling, ``init_process_group`` waiting for the other ranks. Ranks that are starting are not stuck, and one
that waits in ``init_process_group`` for the others is not a culprit with them, so the start has a budget of
its own, ``start_after`` seconds without progress (like torch's init timeout), before it is called a stall.
A rank without cockpit's hook tells no sync count; its first output starts the run as before.

**The stall threshold**, once running: an explicit ``stall_after`` wins (0 turns the watch off). Without one
it adapts: max(``floor``, ``multiple`` x the longest quiet gap the running phase has shown so far), where a
gap is the time between two progress events of any rank, evaluation and checkpoint pauses (and a stall that
cleared) included. So a run that pauses 40 s to evaluate every epoch is called stalled after 2 min of quiet,
one that never pauses after 60 s, instead of a fixed 10 minutes for both.

Stragglers: cockpit.hang.straggler (a pause, this module's phases and stalls included, is not straggling).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from cockpit.hang.straggler import Beats, Rule, Straggler, share, since
from cockpit.run.progress import RankProgress, RankState

ThresholdRule = Literal["start_after", "stall_after", "adaptive", "off"]  # where a stall threshold comes from

START_AFTER = 600.0  # seconds a start may go without progress (torch's NCCL init timeout is 10 min)
ADAPTIVE_FLOOR = 60.0
ADAPTIVE_MULTIPLE = 3.0

__all__ = ["ADAPTIVE_FLOOR", "ADAPTIVE_MULTIPLE", "START_AFTER", "Monitor", "RankSample", "Straggler", "Verdict"]
# the rank hook's beat, one JSON line as the hook wrote it: {"t", "sync", "n", "in", "since", "ddp", ...}
Beat = dict[str, Any]


@dataclass(frozen=True)
class RankSample:
    """What was read about one rank at one look."""

    rank: int
    host: str
    log_size: int | None = None
    log_mtime: float | None = None
    step: int | None = None  # cockpit.train's metrics, where present
    state: Literal["running", "stopped", "exited"] | None = None  # None: cannot be seen from here
    beat: Beat | None = None  # the rank hook's last beat: {"t", "sync", "n", "in", "since", "ddp", ...}
    step_time: float | None = None  # when ``step`` was recorded, as its metrics record says (its "time")


@dataclass
class Verdict:
    ranks: dict[int, RankProgress] = field(default_factory=dict)  # rank -> its progress (status.json)
    quiet: float = 0.0  # seconds since any rank made progress
    stalled: bool = False
    stopped: tuple[int, ...] = ()  # ranks whose process is stopped or has stopped beating
    straggler: Straggler | None = None
    phase: Literal["starting", "running"] = "starting"  # starting: no rank has completed a step or a collective yet
    threshold: float | None = None  # seconds of quiet that make a stall in this phase; None: the watch is off
    rule: ThresholdRule = "off"
    longest_gap: float = 0.0  # the longest quiet gap of the running phase so far
    since: float | None = None  # when the run was first seen (the start's clock)
    slow_start: bool = False  # starting, and quiet for longer than a running run may be: say where it is


@dataclass
class _Rank:
    size: int | None = None
    step: int | None = None
    n: int = 0  # collectives completed (the hook's count)
    hooked: bool = False  # a beat has been seen
    last_output: float | None = None
    steps: list[tuple[float, int]] = field(default_factory=list)  # (t, step), the last 64
    beats: Beats = field(default_factory=Beats)
    seen: float | None = None  # the last look (or probe) that read it


class Monitor:
    """Feed it a look at every rank now and then; it keeps the little history the verdicts need.
    ``stall_after``: None adapts (see the module docstring), 0 turns the watch off, else seconds. ``dated``: the
    samples' times are this machine's clock (a local run's files): a rank's progress is dated by its log's mtime
    (or its beat's time), within the span since the look that last read it, not by the look that saw it; a large
    run's whole look sees a rank's last step up to seconds after it happened (between, only sentinels are read)."""

    def __init__(self, stall_after: float | None, *, start_after: float | None = START_AFTER,
                 floor: float = ADAPTIVE_FLOOR, multiple: float = ADAPTIVE_MULTIPLE, window: float = 10.0,
                 confirm: int = 3, beat_timeout: float = 10.0, min_wait_share: float = 0.15, ratio: float = 3.0,
                 dated: bool = False):
        self.stall_after, self.start_after = stall_after, start_after
        self.dated = dated
        self.floor, self.multiple = floor, multiple
        self.window, self.beat_timeout = window, beat_timeout
        self.rule = Rule(window, confirm, min_wait_share, ratio)
        self.ranks: dict[int, _Rank] = {}
        self.first_look: float | None = None
        self.last_progress: float | None = None
        self.started = False
        self.longest_gap = 0.0

    def look(self, now: float, samples: list[RankSample]) -> Verdict:
        if not samples:  # no rank has started (queued, in rendezvous): nothing can stall yet
            return Verdict()
        if self.last_progress is None:
            self.first_look = self.last_progress = now
        was_started = self.started
        verdict, progressed, alive = Verdict(), None, False
        for s in samples:
            rec, moved = self._rank(now, s)
            progressed = moved if progressed is None or (moved is not None and moved > progressed) else progressed
            if rec.state in ("stopped", "not responding"):
                verdict.stopped += (s.rank,)
            alive = alive or rec.state != "exited"
            verdict.ranks[s.rank] = rec
        if progressed is not None:
            self._progressed(progressed, was_started)
        verdict.quiet, verdict.since, verdict.longest_gap = now - self.last_progress, self.first_look, self.longest_gap
        verdict.phase = "running" if self.started else "starting"
        verdict.threshold, verdict.rule = self.threshold()
        verdict.stalled = alive and verdict.threshold is not None and verdict.quiet >= verdict.threshold
        if verdict.phase == "starting" and self.stall_after != 0:
            verdict.slow_start = alive and verdict.quiet >= (self.stall_after or self.floor)
        pausing = verdict.phase == "starting" or verdict.stalled
        verdict.straggler = self.rule.judge(now, {r: x.beats for r, x in self.ranks.items()},
                                            {s.rank: s.host for s in samples}, pausing)
        self._flags(verdict)
        return verdict

    def probe(self, now: float, samples: list[RankSample]) -> bool:
        """A look at a few ranks between two of ``look``'s (a large run's watchdog): True when one of them made
        progress since it was last seen, which restarts the quiet clock as ``look`` would. Their sizes, steps and
        counts are kept, so the next ``look`` counts that progress once. False, and nothing kept, before the run
        started or for a rank ``look`` has not seen yet: then only a whole look can tell."""
        if not self.started or self.last_progress is None or any(s.rank not in self.ranks for s in samples):
            return False
        progressed: float | None = None
        for s in samples:
            r = self.ranks[s.rank]
            grew, n, moved = _moved(r, s)
            at = self._dated(r, s, grew, n > r.n, now) if moved else None
            if grew:
                r.last_output = s.log_mtime or now
            r.size, r.step, r.n, r.seen = s.log_size, s.step, max(r.n, n), now
            progressed = at if progressed is None or (at is not None and at > progressed) else progressed
        if progressed is not None:
            self._progressed(progressed, True)
        return progressed is not None

    def _progressed(self, at: float, was_started: bool) -> None:
        last = self.last_progress if self.last_progress is not None else at
        if was_started:  # the start's silence has a budget of its own; it says nothing of later pauses
            self.longest_gap = max(self.longest_gap, at - last)
        self.last_progress = max(at, last)

    def _dated(self, r: _Rank, s: RankSample, grew: bool, counted: bool, now: float) -> float:
        """When a rank's progress happened (``dated``): the latest of its log's mtime, if it grew, its beat's time,
        if its count moved (the beat is written after the collectives it counts, so a rank that printed and then
        completed a collective is not dated by the print), and its metrics record's time, if its step moved (a
        look that read the log just written and the metrics not yet: the next one sees the step alone, and at
        4,096 loaded ranks dated it 1-1.8 s after the last line); never before the look that last read it, nor
        after ``now``. Else (not dated, a rank not read before, nothing that says when) ``now``."""
        if not self.dated or r.seen is None:
            return now
        said = s.log_mtime if grew else None
        if counted and s.beat and "t" in s.beat:
            said = max(said or 0.0, float(s.beat["t"]))
        if s.step_time is not None and s.step is not None and s.step != r.step:
            said = max(said or 0.0, s.step_time)
        return now if said is None else min(now, max(r.seen, said))

    def threshold(self) -> tuple[float | None, ThresholdRule]:
        """(seconds of quiet that make a stall now, where that number comes from)."""
        if self.stall_after == 0:
            return None, "off"
        if not self.started:
            return (self.start_after, "start_after") if self.start_after else (None, "off")
        if self.stall_after is not None:
            return float(self.stall_after), "stall_after"
        return max(self.floor, self.multiple * self.longest_gap), "adaptive"

    def _rank(self, now: float, s: RankSample) -> tuple[RankProgress, float | None]:
        """This rank's progress record, and when it made progress since the last look (None: it made none)."""
        r = self.ranks.get(s.rank)
        if r is None:  # (not setdefault: a _Rank made and dropped for every rank at every look)
            r = self.ranks[s.rank] = _Rank()
        grew, n, moved = _moved(r, s)
        at = self._dated(r, s, grew, n > r.n, now) if moved else None
        r.seen = now
        beat = s.beat or {}
        if grew:
            r.last_output = s.log_mtime or now
        r.hooked = r.hooked or bool(beat)  # (a beat file caught while it rolls over reads as none)
        # started: a step or a collective completed; a rank without the hook (never a beat) by its first output
        self.started = self.started or s.step is not None or n > 0 or (grew and not r.hooked)
        r.size, r.step, r.n = s.log_size, s.step, max(r.n, n)
        if "t" in beat:
            r.beats.add(float(beat["t"]), _waited(beat), n)
        step = s.step if s.step is not None else (n if beat else None)
        if step is not None and (not r.steps or r.steps[-1][1] != step):
            r.steps = [*r.steps[-63:], (now, step)]
        state: RankState | None = s.state
        if state != "exited" and beat and now - float(beat["t"]) > self.beat_timeout and state != "stopped":
            state = "not responding" if state is None else state
        return RankProgress(
            s.host, state or "unknown", step=step,
            step_source="metrics" if s.step is not None else ("syncs" if step is not None else None),
            rate=window_rate(r.steps, now, self.window), wait=share(r.beats.points, now, self.window),
            collective=beat.get("in"), in_since=beat.get("since"), last_output=r.last_output), at

    @staticmethod
    def _flags(verdict: Verdict) -> None:
        ranks = verdict.ranks
        for rank in verdict.stopped:
            ranks[rank] = replace(ranks[rank], flag="stopped")
        if verdict.stalled:
            for rank, rec in ranks.items():
                ranks[rank] = replace(rec, flag=rec.flag or "stalled")
        elif verdict.straggler is not None:
            rank = verdict.straggler.rank
            ranks[rank] = replace(ranks[rank], flag="straggler")


def _moved(r: _Rank, s: RankSample) -> tuple[bool, int, bool]:
    """(its log grew, its collectives completed, it made progress) of a rank since ``r`` was kept."""
    grew = s.log_size is not None and s.log_size != r.size and (r.size is not None or s.log_size > 0)
    n = int((s.beat or {}).get("n") or 0)
    return grew, n, grew or (s.step is not None and s.step != r.step) or n > r.n


def _waited(beat: Beat) -> float:
    """Seconds in collectives so far, the one the rank is inside now included."""
    inside = float(beat["t"]) - float(beat["since"]) if beat.get("in") and beat.get("since") else 0.0
    return float(beat.get("sync", 0.0)) + max(0.0, inside)


def window_rate(points: list[tuple[float, int]], now: float, window: float) -> float | None:
    """Steps per second over the ``window`` seconds before ``now`` of ``points`` ((time, step), oldest first),
    rounded to 3 places; None with fewer than two points in it (the TUI's rank table rates printed steps alike)."""
    # found from the end: a window holds a few of the 64 points kept, and 4,096 ranks are rated at a look
    inside: list[tuple[float, int]] = since(points, now - window)
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return round((inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0]), 3)
