"""Repeated events folded as they stream: what `cockpit diagnose` keeps of a file, bounded by what it reports.

A job that crash-loops for hours prints the same failures thousands of times. The findings show at most
``MAX_EVIDENCE`` lines of evidence per kind and name each distinct failure once, so keeping every repeat costs
memory in proportion to what was read, not to what is reported. ``Fold`` keeps, per distinct event (its
``key``: every field but the line and the timestamp, the text with its digits made ``0``), the first
``KEEP_FIRST`` occurrences, the last one, and the one with the smallest timestamp of all where that is another;
the rest are counted. Where no event repeats more than ``KEEP_FIRST + 1`` times, what is kept is every event,
so the diagnosis of such a file is the one of the whole list; past that, the kept occurrences are the ones the
rules read (first evidence, the last network a process chose, the earliest root cause) and the counts say
how many there were. A segment the parser stepped over again costs a count, not a step per event (``Fold``).

Pure and stdlib-only.
"""

from __future__ import annotations

from dataclasses import fields
from operator import attrgetter
from weakref import WeakKeyDictionary

from cockpit.logs.diagnose.model import MAX_EVIDENCE
from cockpit.logs.parse.event import Event
from cockpit.logs.parse.memo import Segment, moved

KEEP_FIRST = MAX_EVIDENCE
"""Occurrences kept from the start of each distinct event: a finding's evidence is its first ``MAX_EVIDENCE``
lines, so the evidence of a folded file is the one of the whole file."""

_DIGITS = str.maketrans("123456789", "000000000")
_DIGIT_BYTES = bytes.maketrans(b"123456789", b"000000000")
_OTHER_FIELDS = attrgetter(*(f.name for f in fields(Event) if f.name not in ("line", "text", "ts")))

Key = tuple[object, ...]


def key_of(event: Event, templates: dict[str, str] | None = None) -> Key:
    """What makes two events the same for folding: kind, process, fields, and the text with digits as ``0``
    (a timestamp, a step, an address of each repeat differ; the failure does not). ``templates``: text ->
    its digits as ``0``, a cache the caller keeps (``str.translate`` costs more than the rest)."""
    text = event.text
    if templates is None:
        return (_zeroed(text), *_OTHER_FIELDS(event))
    template = templates.get(text)
    if template is None:
        if len(templates) >= _TEMPLATES_MAX:
            templates.clear()
        template = templates[text] = _zeroed(text)
    return (template, *_OTHER_FIELDS(event))


def _zeroed(text: str) -> str:
    """``text`` with its digits as ``0``: for ASCII text through bytes, whose ``translate`` is a table lookup
    in C (~10x ``str.translate``'s, which looks each character up in a dict: most of a fold's time)."""
    if text.isascii():
        return text.encode("ascii").translate(_DIGIT_BYTES).decode("ascii")
    return text.translate(_DIGITS)


_TEMPLATES_MAX = 4096


class _Kept:
    """One distinct event: its kept occurrences, each with its place in the file (the how-many-th event it
    was), and how many there were. The first ``KEEP_FIRST``; past them, the last (greatest place) and the
    earliest (smallest timestamp of all, the first such one), each once. Every one of these is an aggregate
    that does not depend on the order it is fed in (a count, a max, a min), so a segment's repeats can be
    added up later (``Fold``). The last and the earliest are kept as (place, event, lines to move it by): a
    segment's event is copied only if it stays (``memo.moved``)."""

    __slots__ = ("count", "earliest", "first", "floor", "last")

    def __init__(self, at: int, event: Event) -> None:
        self.first = [(at, event)]
        self.last: tuple[int, Event, int] | None = None
        self.earliest: tuple[int, Event, int] | None = None
        """The occurrence past the first ones with the smallest timestamp of all, if it is smaller than every
        first one's."""
        self.floor = _NEVER if event.ts is None else event.ts
        """The smallest timestamp seen (``_NEVER``: none)."""
        self.count = 1

    def add(self, at: int, event: Event, shift: int = 0) -> None:
        self.count += 1
        ts = event.ts
        if len(self.first) < KEEP_FIRST:
            self.first.append((at, moved(event, shift)))
            if ts is not None and ts < self.floor:
                self.floor = ts
            return
        if ts is not None and ts < self.floor:
            self.floor = ts
            self.earliest = (at, event, shift)
        self.last = (at, event, shift)

    def later(self, at: int, event: Event, shift: int, times: int) -> None:
        """``times`` more occurrences, none earlier than the floor (repeats of ones added), the last at ``at``."""
        self.count += times
        if self.last is None or self.last[0] < at:
            self.last = (at, event, shift)

    def _lazy(self) -> list[tuple[int, Event, int]]:
        earliest, last = self.earliest, self.last
        if last is not None and earliest is not None and last[0] == earliest[0]:
            return [earliest]
        return [x for x in (earliest, last) if x is not None]

    def kept(self) -> list[tuple[int, Event]]:
        return [*self.first, *((at, moved(e, shift)) for at, e, shift in self._lazy())]

    def kept_count(self) -> int:
        """``len(self.kept())``, without making it."""
        earliest, last = self.earliest, self.last
        if last is None:
            return len(self.first) + (earliest is not None)
        return len(self.first) + (1 if earliest is None or earliest[0] == last[0] else 2)


_NEVER = float("inf")
DEFERRED_MAX = 256
"""Segments whose repeats are counted, not yet added to their events' entries: past this many, they are added
(each holds its segment and plan alive: bounded memory whatever the memo does)."""


class _Plan:
    """A segment's events with their keys (made once), and whether a repeat of it can only count (``steady``:
    it was folded in before, each of its events' entries has its first ones, so a repeat adds to counts and
    moves the last)."""

    __slots__ = ("events", "steady")

    def __init__(self, events: list[tuple[Key, Event]]) -> None:
        self.events = events
        self.steady = False


class Fold:
    """The events of one file, folded (see the module docstring): ``add`` each, in order (or ``segment``, the
    events of a run of lines the parser stepped over: a ``memo.Sink``); ``events`` the kept ones in order;
    ``repeats`` the counts of the distinct events that lost occurrences.

    A steady segment's repeat costs a constant, not a step per event: its passes are counted (how many, the
    place and shift of the last) and added to its events' entries once, when the fold is read (or past
    ``DEFERRED_MAX`` segments)."""

    def __init__(self) -> None:
        self._kept: dict[Key, _Kept] = {}
        self._templates: dict[str, str] = {}
        # a segment's plan, while the parser's memo keeps the segment (its bound is this one's)
        self._plans: WeakKeyDictionary[Segment, _Plan] = WeakKeyDictionary()
        self._deferred: dict[int, tuple[_Plan, int, int, int]] = {}  # id(plan) -> (plan, passes, last at, shift)
        self.read = 0
        """Events added."""

    def add(self, events: list[Event]) -> None:
        """Fold in the next events of the file, in order."""
        kept, templates = self._kept, self._templates
        at = self.read
        self.read += len(events)
        for event in events:
            text = event.text  # key_of(event, templates), inline: one call less per event
            template = templates.get(text)
            if template is None:
                if len(templates) >= _TEMPLATES_MAX:
                    templates.clear()
                template = templates[text] = _zeroed(text)
            key = (template, *_OTHER_FIELDS(event))
            entry = kept.get(key)
            if entry is None:
                kept[key] = _Kept(at, event)
            else:
                entry.add(at, event)
            at += 1

    def segment(self, segment: Segment, base: int) -> None:
        """Fold in the events of a segment the parser stepped over, its line before the first numbered
        ``base``: their keys are the segment's own (made once), and an event is copied only if it is kept."""
        plan = self._plans.get(segment)
        if plan is None:
            plan = self._plans[segment] = _Plan([(key_of(e, self._templates), e) for e in segment.events])
        shift = base - segment.base
        at = self.read
        self.read += len(plan.events)
        if plan.steady:
            passes = self._deferred.get(id(plan))
            self._deferred[id(plan)] = (plan, passes[1] + 1 if passes else 1, at, shift)
            if len(self._deferred) > DEFERRED_MAX:
                self._settle()
            return
        kept = self._kept
        for key, event in plan.events:
            entry = kept.get(key)
            if entry is None:
                kept[key] = _Kept(at, moved(event, shift))
            else:
                entry.add(at, event, shift)
            at += 1
        plan.steady = all(len(kept[key].first) >= KEEP_FIRST for key, _ in plan.events)

    def _settle(self) -> None:
        """Add the counted repeats of steady segments to their events' entries."""
        kept = self._kept
        for plan, passes, at, shift in self._deferred.values():
            for key, event in plan.events:
                kept[key].later(at, event, shift, passes)
                at += 1
        self._deferred.clear()

    def events(self) -> list[Event]:
        """The kept occurrences, in the order they were read."""
        self._settle()
        kept: list[tuple[int, Event]] = []
        for entry in self._kept.values():
            if entry.last is None and entry.earliest is None:  # most entries: seen a few times at most
                kept += entry.first
            else:
                kept += entry.kept()
        kept.sort()  # by place: each event's own
        return [e for _, e in kept]

    def kept_count(self) -> int:
        """How many occurrences are kept (the memory the fold holds): at most ``KEEP_FIRST + 2`` per key."""
        self._settle()
        return sum(entry.kept_count() for entry in self._kept.values())

    def repeats(self) -> dict[tuple[int, str], int]:
        """(line, kind) of each kept occurrence of a distinct event that lost occurrences -> how many times
        that event occurred in the file."""
        self._settle()
        return {(e.line, e.kind): entry.count for entry in self._kept.values()
                if entry.count > entry.kept_count() for _, e in entry.kept()}

    @property
    def folded(self) -> int:
        """Occurrences counted, not kept."""
        return self.read - self.kept_count()
