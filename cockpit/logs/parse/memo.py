"""Runs of lines the parser has read before: their events again, without parsing them again.

A crash-looping job prints the same lines over and over (its NCCL init, its traceback, the launcher's
failure table), and in such an error-dense log nearly every line is one a rule must look at: parsing costs
tens of microseconds a line. But where the parser is *clean* (nothing held, no table record or traceback
open), the events of the lines up to the next clean point depend only on those lines, the line number they
start on, and the facts already reported (``LineParser._seen``: an informational fact is reported once).

So a ``Segment`` (the lines from one clean point to the next, and their events) is kept with the events a
repeat of it gives: those it gave, less the facts it reported first (``LineParser._note_fresh``: a repeat
finds them reported), the same whenever those lines come again at a clean point. The block walk
(``block.feed_gated``) looks a clean point's line up here first and, where the lines that follow are a kept
segment's, gives its events moved to their lines and steps over it: a dict lookup and a list compare in C
instead of the parser's Python per line.

Bounded: at most ``MAX_CHARS`` bytes of segments, then it starts again; a segment of more than
``SEGMENT_MAX_LINES`` lines is not kept. Pure and stdlib-only.
"""

from __future__ import annotations

from typing import Protocol

from cockpit.logs.parse.event import Event

MAX_CHARS = 4_000_000
"""Bytes of kept segments (a few MB): past it, the memo is emptied and fills again."""
SEGMENT_MAX_LINES = 512
CANDIDATES = 8
"""Kept segments per first line (the same line may start several runs)."""


class Segment:
    """Lines read from a clean point to the next, and their events (lines numbered from ``base``)."""

    __slots__ = ("__weakref__", "base", "events", "lines", "next", "where")  # a consumer's notes die with it

    def __init__(self, lines: list[bytes], events: list[Event], base: int, where: tuple[str | None, int | None]):
        self.lines = lines
        self.events = events
        self.base = base
        """The line number before the segment's first line, when it was read."""
        self.where = where
        """The caller's (host, rank) it was read with: they go into its events."""
        self.next: Segment | None = None
        """The segment that came right after it last time (a repeated log repeats its runs in order: tried
        first, it spares the lookup, and a common first line such as an empty one is no guess)."""

    def moved(self, base: int) -> list[Event]:
        """Its events, as read with the line before its first line numbered ``base``."""
        shift = base - self.base
        return [moved(e, shift) for e in self.events]


def moved(event: Event, shift: int) -> Event:
    """``event`` ``shift`` lines further (``dataclasses.replace`` of the line, without its cost)."""
    if not shift:
        return event
    out = object.__new__(Event)
    out.__dict__.update(event.__dict__)
    out.__dict__["line"] = event.line + shift
    return out


class Sink(Protocol):
    """Where the block walk can hand events to instead of returning them (``block_events(sink=)``): the events
    it read, and the segments it stepped over (their events, not copied: a consumer that folds repeats needs
    only few of them)."""

    def add(self, events: list[Event]) -> None: ...

    def segment(self, segment: Segment, base: int) -> None: ...


PROBE_EVERY = 16
"""Where the memo did not pay on the last block that used it (fewer than one lookup in ``PAYS`` found a run: an
ordinary log, whose lines rarely come again at a clean point), it is tried again on one block in this many."""
PAYS = 4
TRIAL = 2048
"""Lookups in a block before it is judged (``pays``): past them, a block where fewer than one in ``PAYS`` found
a run is read on without the memo."""


class Memo:
    """Kept segments by their first line (one per parser), and whether looking them up pays."""

    __slots__ = ("_blocks", "_chars", "_finds", "_hits", "_pays", "_segments")

    def __init__(self) -> None:
        self._segments: dict[bytes, list[Segment]] = {}
        self._chars = 0
        self._finds = self._hits = self._blocks = 0
        self._pays = True

    def use_block(self) -> bool:
        """Whether the next block is worth walking with the memo (``repeat``): yes while lookups find runs
        (a crash loop), else on one block in ``PROBE_EVERY`` (a log that starts repeating is found again)."""
        if self._finds:
            self._pays = self._hits * PAYS >= self._finds
            self._finds = self._hits = 0
        self._blocks += 1
        return self._pays or self._blocks % PROBE_EVERY == 0

    def repeating(self) -> bool:
        """Whether lookups found runs on the last block judged (a crash loop)."""
        return self._pays

    @property
    def blocks(self) -> int:
        """Blocks asked about (``use_block``)."""
        return self._blocks

    def pays(self) -> bool:
        """Whether lookups still find runs in this block (always before ``TRIAL`` lookups)."""
        return self._finds < TRIAL or self._hits * PAYS >= self._finds

    def find(self, lines: list[bytes], at: int, where: tuple[str | None, int | None],
             after: Segment | None) -> Segment | None:
        """The longest kept segment that ``lines[at:]`` starts with, read with the same ``where``; None if none.
        ``after``: the segment that ended at ``at``, if any (its ``next`` is tried first). The longest: the
        segments stepped over one after another are kept joined (``repeat``), and where a block's edge cut the
        chain another way last time, the joined one is found by its first line, not by ``next``."""
        self._finds += 1
        if after is not None:
            segment = after.next
            if segment is not None and lines[at:at + len(segment.lines)] == segment.lines and segment.where == where:
                self._hits += 1
                return segment
        found = None
        for segment in self._segments.get(lines[at], ()):  # the longest that matches: a chain kept after its parts
            size = len(segment.lines)
            if (found is None or size > len(found.lines)) and segment.where == where \
                    and lines[at:at + size] == segment.lines:
                found = segment
        if found is not None:
            if after is not None:
                after.next = found
            self._hits += 1
        return found

    def keep(self, lines: list[bytes], events: list[Event], base: int, where: tuple[str | None, int | None],
             after: Segment | None) -> Segment | None:
        """Keep a segment read from a clean point to the next, with the events a repeat gives; ``after``: the
        segment that ended where it starts, if any. The segment kept, or None (too long)."""
        if len(lines) > SEGMENT_MAX_LINES:
            return None
        chars = sum(len(line) for line in lines)
        if self._chars + chars > MAX_CHARS:
            self._segments.clear()
            self._chars = 0
        known = self._segments.setdefault(lines[0], [])
        if len(known) >= CANDIDATES:
            self._chars -= sum(len(line) for line in known.pop(0).lines)
        segment = Segment(lines, events, base, where)
        known.append(segment)
        self._chars += chars
        if after is not None:
            after.next = segment
        return segment
