"""Repeated events folded as they stream: what `cockpit diagnose` keeps of a file, bounded by what it reports.

A job that crash-loops for hours prints the same failures thousands of times. The findings show at most
``MAX_EVIDENCE`` lines of evidence per kind and name each distinct failure once, so keeping every repeat costs
memory in proportion to what was read, not to what is reported. ``Fold`` keeps, per distinct event (its
``key``: every field but the line and the timestamp, the text with its digits made ``0``), the first
``KEEP_FIRST`` occurrences, the last one, and the one with the earliest timestamp where that is another; the
rest are counted. Where no event repeats more than ``KEEP_FIRST + 1`` times, what is kept is every event, so
the diagnosis of such a file is the one of the whole list; past that, the kept occurrences are the ones the
rules read (first evidence, the last network a process chose, the earliest root cause) and the counts say
how many there were.

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
_OTHER_FIELDS = attrgetter(*(f.name for f in fields(Event) if f.name not in ("line", "text", "ts")))

Key = tuple[object, ...]


def key_of(event: Event, templates: dict[str, str] | None = None) -> Key:
    """What makes two events the same for folding: kind, process, fields, and the text with digits as ``0``
    (a timestamp, a step, an address of each repeat differ; the failure does not). ``templates``: text ->
    its digits as ``0``, a cache the caller keeps (``str.translate`` costs more than the rest)."""
    text = event.text
    if templates is None:
        return (text.translate(_DIGITS), *_OTHER_FIELDS(event))
    template = templates.get(text)
    if template is None:
        if len(templates) >= _TEMPLATES_MAX:
            templates.clear()
        template = templates[text] = text.translate(_DIGITS)
    return (template, *_OTHER_FIELDS(event))


_TEMPLATES_MAX = 4096


class _Kept:
    """One distinct event: its kept occurrences (first ones, last, earliest), each with its place in the file
    (the how-many-th event it was), and how many there were. The last and the earliest are kept as (place,
    event, lines to move it by): a segment's event is copied only if it stays (``memo.moved``)."""

    __slots__ = ("count", "earliest", "first", "floor", "last")

    def __init__(self, at: int, event: Event) -> None:
        self.first = [(at, event)]
        self.last: tuple[int, Event, int] | None = None
        self.earliest: tuple[int, Event, int] | None = None
        self.floor = _NEVER
        """The earliest timestamp kept (``_NEVER``: none)."""
        self.count = 1

    def add(self, at: int, event: Event, shift: int = 0) -> None:
        self.count += 1
        ts = event.ts
        if len(self.first) < KEEP_FIRST:
            self.first.append((at, moved(event, shift)))
        elif ts is not None and ts < self.floor:
            self.earliest = (at, event, shift)
        else:
            self.last = (at, event, shift)
            return
        if ts is not None and ts < self.floor:
            self.floor = ts
        self.last = None if self.earliest is not None and self.earliest[0] == at else self.last

    def kept(self) -> list[tuple[int, Event]]:
        lazy = [(x[0], moved(x[1], x[2])) for x in (self.earliest, self.last) if x is not None]
        return [*self.first, *lazy]

    def kept_count(self) -> int:
        return len(self.first) + (self.earliest is not None) + (self.last is not None)


_NEVER = float("inf")


class Fold:
    """The events of one file, folded (see the module docstring): ``add`` each, in order (or ``segment``, the
    events of a run of lines the parser stepped over: a ``memo.Sink``); ``events`` the kept ones in order;
    ``repeats`` the counts of the distinct events that lost occurrences."""

    def __init__(self) -> None:
        self._kept: dict[Key, _Kept] = {}
        self._templates: dict[str, str] = {}
        # a segment's events with their keys, while the parser's memo keeps the segment (its bound is this one's)
        self._plans: WeakKeyDictionary[Segment, list[tuple[Key, Event]]] = WeakKeyDictionary()
        self.read = 0
        """Events added."""

    def add(self, events: list[Event]) -> None:
        """Fold in the next events of the file, in order."""
        kept, templates = self._kept, self._templates
        at = self.read
        self.read += len(events)
        for event in events:
            key = key_of(event, templates)
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
            plan = self._plans[segment] = [(key_of(e, self._templates), e) for e in segment.events]
        shift = base - segment.base
        kept, at = self._kept, self.read
        self.read += len(plan)
        for key, event in plan:
            entry = kept.get(key)
            if entry is None:
                kept[key] = _Kept(at, moved(event, shift))
            else:
                entry.add(at, event, shift)
            at += 1

    def events(self) -> list[Event]:
        """The kept occurrences, in the order they were read."""
        return [e for _, e in sorted(x for entry in self._kept.values() for x in entry.kept())]

    def kept_count(self) -> int:
        """How many occurrences are kept (the memory the fold holds): at most ``KEEP_FIRST + 2`` per key."""
        return sum(entry.kept_count() for entry in self._kept.values())

    def repeats(self) -> dict[tuple[int, str], int]:
        """(line, kind) of each kept occurrence of a distinct event that lost occurrences -> how many times
        that event occurred in the file."""
        return {(e.line, e.kind): entry.count for entry in self._kept.values()
                if entry.count > entry.kept_count() for _, e in entry.kept()}

    @property
    def folded(self) -> int:
        """Occurrences counted, not kept."""
        return self.read - self.kept_count()
