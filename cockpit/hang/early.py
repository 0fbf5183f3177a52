"""Stacks asked before a quiet stretch is called a stall (issue 32), so that the finding need not wait for every
rank's answer once the threshold is reached.

Gathering every rank's stacks takes up to one beat of the rank hook's (it answers the dump request at its next
beat, once a second) and, at 4,096 ranks, seconds more (a marker and a signal per rank, each answer read and
parsed): asked at the threshold, the finding came 3-4.5 s after it at 4,096 ranks against about 1 s at 8. So the
watchdog asks once in a quiet stretch, that long before its threshold (``Early.ask_at``: the last gathering's time
and a look, never before half the threshold), and at the threshold uses those stacks if they still say where the
ranks are (``Early.take``): the quiet stretch is the same one (no rank made progress since: its clock's start is
unchanged), every rank asked answered, and each rank's state, collective, time in it and step are what the look
before the ask saw. Anything else, and the stacks are gathered again at the threshold, as before. Left unseen: a
rank outside any collective that moved from one function of its own to another without printing, stepping or
completing a collective (stacks asked at the threshold are one moment's too).

Pure: verdicts and evidence in, the choice out; the watchdog gathers.
"""

from __future__ import annotations

from dataclasses import dataclass

from cockpit.hang.evidence import Evidence
from cockpit.hang.progress import Verdict
from cockpit.hang.stacks import RankStack

SHARE = 0.5  # never asked before this share of the threshold: a pause that ends sooner costs no stacks request
MARGIN = 1.5  # the last gathering's time, this many times over: the next may come on a busier machine
FIRST_S = 1.0  # the first gathering's time, before one was timed: the hook's beat (a dump is answered at the next)
FIRST_PER_RANK_S = 0.0005  # and per rank asked (markers, answers read and parsed: 2 s more at 4,096 ranks)
Marks = dict[int, tuple[object, ...]]


@dataclass(frozen=True)
class Asked:
    """Stacks gathered during one quiet stretch, before its threshold."""

    quiet_since: float  # the stretch's start (Monitor.last_progress when asked): progress since makes another
    marks: Marks  # each rank as the look before the ask saw it (``marks``)
    evidence: dict[int, Evidence]
    stacks: dict[int, RankStack]  # each dump parsed (cockpit.hang.classes.parse_stacks)


def marks(verdict: Verdict) -> Marks:
    """What must not move between the ask and the finding, by rank: its state, the collective it is in and since
    when (its beat), its step."""
    return {r: (rec.state, rec.collective, rec.in_since, rec.step) for r, rec in verdict.ranks.items()}


class Early:
    """The early ask of one watchdog: when it is due, what it got, and whether that still holds."""

    def __init__(self) -> None:
        self.asked: Asked | None = None
        self.took: float | None = None  # seconds the last gathering took (any of the watchdog's)

    def ask_at(self, threshold: float, ranks: int, look: float) -> float:
        """Seconds of quiet at which the stacks are asked: ``threshold`` less a look's worth (``look``, seconds
        between two) and the gathering's time (the last one's, else a guess from ``ranks``), with a margin;
        never before SHARE of the threshold."""
        took = self.took if self.took is not None else FIRST_S + FIRST_PER_RANK_S * ranks
        return max(SHARE * threshold, threshold - look - MARGIN * took)

    def due(self, verdict: Verdict, quiet_since: float | None, look: float) -> bool:
        """Whether to ask now: a running run quiet for ``ask_at`` of its threshold, no rank stopped, and nothing
        asked yet in this quiet stretch (stacks of an earlier stretch are dropped)."""
        if self.asked is not None and self.asked.quiet_since != quiet_since:
            self.asked = None  # the ranks made progress since: those stacks say nothing of this stretch
        if verdict.phase != "running" or verdict.threshold is None or verdict.stalled or verdict.stopped:
            return False
        return self.asked is None and verdict.quiet >= self.ask_at(verdict.threshold, len(verdict.ranks), look)

    def until_due(self, verdict: Verdict, look: float) -> float:
        """Seconds from ``verdict``'s look until its quiet reaches the ask's point (nothing asked yet) or the
        threshold, just past it; ``look`` (the seconds between two looks) when neither comes sooner."""
        if verdict.phase != "running" or verdict.threshold is None or verdict.stalled:
            return look
        points = [verdict.threshold]
        if self.asked is None:
            points.append(self.ask_at(verdict.threshold, len(verdict.ranks), look))
        return min([look, *(p - verdict.quiet + 0.01 for p in points if p > verdict.quiet)])

    def keep(self, quiet_since: float, seen: Marks, evidence: dict[int, Evidence],
             stacks: dict[int, RankStack]) -> None:
        """What an early ask got, with ``seen``: the ranks' ``marks`` from the look before it."""
        self.asked = Asked(quiet_since, seen, evidence, stacks)

    def take(self, verdict: Verdict, quiet_since: float | None) -> Asked | None:
        """The stacks asked early in this quiet stretch, when they still hold for the ``verdict`` that found the
        stall (module docstring); dropped either way."""
        asked, self.asked = self.asked, None
        if asked is None or asked.quiet_since != quiet_since or marks(verdict) != asked.marks:
            return None
        live = {r for r, rec in verdict.ranks.items() if rec.state != "exited"}
        if not live <= asked.evidence.keys() or not all(e.text for e in asked.evidence.values()):
            return None  # a rank that did not answer early is asked again, as at any stall
        return asked
