"""The run feed's state, kept in the feed process (cockpit.tui.models.feed_process), not in the UI's.

Every tailed line is stored (bounded, see log_store), filtered for the view in focus, and scanned by the log
parser for failures. ``take()`` hands out what the UI needs since its last batch, and only that: the new lines
of the view in focus (or, when the UI fell more than ``max_lines`` behind, the newest ``max_lines`` with
``reset``), the status when it changed, new live events, and the counts of the sources that changed (4,096
ranks: a dict of every source in every batch was most of a frame). The other views' lines stay
here until the UI switches to one of them (``set_view``).

The live scan has a CPU budget (``parse_budget`` of each second, at most ``scan_slice`` per batch): in its own
process it no longer holds the UI's GIL, but on a small machine the feed, the ranks and the UI share the
cores. Lines over the budget are counted in ``skipped``; the full diagnosis (cockpit.logs.diagnose.report over the
files) sees every line.

Pure: no IO, no threads, no textual.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from cockpit.logs.parse.parser import Event, LineParser
from cockpit.run.store import RunStatus
from cockpit.tui.models.log_filter import LineFilter
from cockpit.tui.models.log_order import SourceClock, in_time_order
from cockpit.tui.models.log_store import MERGED, LogStore
from cockpit.tui.models.printed_progress import PrintedProgress, PrintedSteps

SCAN_SLICE = 0.005  # seconds of parsing per batch at most
_LOSS = re.compile("loss", re.IGNORECASE)  # what a printed progress line holds (cockpit.plot.printed)
Clocks = Callable[[list[tuple]], dict[tuple, SourceClock]]  # sources -> when their lines were written
# what str.splitlines() splits on besides "\n" (which a tailed line never holds): textual's Log splits on them
_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


@dataclass(frozen=True)
class LiveEvent:
    """The first failure of a kind on one source; ``line`` is its 1-based line in that source's log file."""

    source: tuple
    kind: str
    text: str
    line: int
    count: int = 1


class SourceStats(NamedTuple):
    """A source's counts (a tuple: 4,096 of them come in a batch, each one object, built in C; feed_pack)."""

    lines: int
    last_time: float | None
    dropped: int
    printed: PrintedProgress | None = None  # a rank's step and rate as its printed lines say (printed_progress)


@dataclass
class Drained:
    """What arrived since the last batch. ``reset``: show ``lines`` instead of appending them (a view switch,
    or the view fell more than max_lines behind). ``view_gen``: the view request this batch answers to (the
    UI drops batches of a view it left)."""

    lines: list[str]
    reset: bool
    status: RunStatus | None
    events: list[LiveEvent]
    stats: dict[tuple, SourceStats]  # of the sources that changed since the last batch only
    finished: bool
    skipped: int = 0
    lines_per_s: float = 0.0
    view_gen: int = 0
    width: int | None = None  # ``lines`` are log-ready (see log_ready) and the widest is this long (all ASCII)
    error: str | None = None  # the feed process failed: what it said


class FeedState:
    def __init__(self, max_lines: int = 10_000, parse_budget: float = 0.15, scan_slice: float = SCAN_SLICE,
                 clocks: Clocks | None = None):
        self.max_lines = max_lines
        # an ended run's batch of many sources goes into the merged view in time order (log_order), with what
        # ``clocks`` says of when each source's lines were written; None: in the order read
        self.clocks = clocks
        self.parse_budget, self.scan_slice = parse_budget, scan_slice
        self.store = LogStore(max_lines)
        self.view: tuple | None = MERGED
        self.view_gen = 0
        self.filter = LineFilter()
        self._pending: deque[str] = deque(maxlen=max_lines)
        self._overflow = False
        self._reset = False
        self._status: RunStatus | None = None
        self._status_json: str | None = None  # the kept status's to_json
        self._status_new = False
        self._events: list[LiveEvent] = []
        self._seen: set = set()
        self._stats_new = False
        self._changed: set[tuple] = set()  # sources whose counts changed since the last take
        self.finished = False
        self._finished_sent = False
        self._parsers: dict[tuple, LineParser] = {}
        self.printed = PrintedSteps()  # every line, outside the parse budget: a search per line at most
        self._count: dict[tuple, int] = {}  # lines fed to each source's parser
        self._offset: dict[tuple, int] = {}  # file line index minus parser line index (drops, skips)
        self._window = (0.0, 0.0)  # (start, seconds spent parsing) of the current 1 s budget window
        self.skipped = 0
        self._rate = (time.monotonic(), 0, 0.0)  # (window start, lines since, last rate)

    # --- in: the tail engine --------------------------------------------------------------------------------
    def on_status(self, status: RunStatus) -> None:
        """Keep ``status`` where its JSON differs from the last kept one's (kept with it: a 4,096-rank status's
        to_json is ~17 ms); the same object again (follow_run's, status.json unchanged) is not looked at."""
        if status is self._status:
            return
        text = status.to_json()
        if text != self._status_json:
            self._status, self._status_json, self._status_new = status, text, True

    def on_batch(self, batch) -> None:
        by_source = batch.by_source()
        view = self.view
        texts, prefixed = {}, {}
        self.store.expect(by_source)
        for source, lines in by_source.items():
            texts[source] = [line.text for line in lines]
            if _LOSS.search("\n".join(texts[source])):  # most batches of most sources: one search, no loss
                self.printed.feed(source, [(line.text, line.t_read) for line in lines])
            prefixed[source] = self.store.add(source, texts[source], lines[-1].t_read, merge=False)
            if view == source:
                self._queue(texts[source])
        merged = self._merged(texts, prefixed)
        self.store.merged.extend(merged)
        if view is MERGED:
            self._queue(merged)
        for source, count in batch.dropped.items():
            self.store.dropped(source, count)
        self._changed.update(by_source, batch.dropped)
        self._stats_new = True
        start, count, rate = self._rate
        count += len(batch.lines)
        now = time.monotonic()
        self._rate = (now, 0, count / (now - start)) if now - start >= 1.0 else (start, count, rate)
        self._scan(by_source)

    def _merged(self, texts: dict[tuple, list[str]], prefixed: dict[tuple, list[str]]) -> list[str]:
        """A batch's lines as the merged view shows them: in the order read (live, that is the order written),
        or for an ended run's lines of several sources, in time order (cockpit.tui.models.log_order)."""
        status = self._status
        if self.clocks is None or status is None or not status.final or sum(map(bool, texts.values())) < 2:
            return [line for lines in prefixed.values() for line in lines]
        return [prefixed[source][i] for source, i in in_time_order(texts, self.clocks(list(texts)))]

    def finish(self) -> None:
        """The run is final and every line was delivered: report what the parsers still held."""
        for source, parser in self._parsers.items():
            self._record_events(source, parser.flush())
        self.finished = True

    def _queue(self, texts: list[str]) -> None:
        accepted = [t for t in texts if self.filter.accepts(t)] if self.filter.active else texts
        if len(self._pending) + len(accepted) > self.max_lines:
            self._overflow = True
        self._pending.extend(accepted)

    def _scan(self, by_source: dict) -> None:
        """Feed the parser within the budget; a batch gets at most ``scan_slice`` seconds, the rest of it is
        counted in ``skipped``."""
        start, spent = self._window
        now = time.perf_counter()
        if now - start >= 1.0:
            start, spent = now, 0.0
        stop_at = now + min(self.scan_slice, max(0.0, self.parse_budget - spent))
        for source, lines in by_source.items():
            if time.perf_counter() >= stop_at:
                self.skipped += len(lines)
                continue
            parser = self._parsers.get(source)
            if parser is None:
                parser = self._parsers[source] = LineParser()
            host, rank = source
            rank_arg = None if rank == "agent" else rank
            for i, line in enumerate(lines):
                if i % 64 == 63 and time.perf_counter() >= stop_at:
                    self.skipped += len(lines) - i
                    break
                # seq is the line's index in its file; the parser numbers what it was fed: keep the offset
                fed = self._count.get(source, 0)
                self._offset[source] = line.seq - fed
                self._count[source] = fed + 1
                self._record_events(source, parser.feed(line.text, host=host, rank=rank_arg))
        self._window = (start, spent + time.perf_counter() - now)

    def _record_events(self, source: tuple, events: list[Event]) -> None:
        for e in events:
            if not e.is_failure:
                continue
            key = (source, e.kind)
            if key in self._seen:
                continue
            self._seen.add(key)
            line = e.line + self._offset.get(source, 0)
            self._events.append(LiveEvent(source, e.kind, e.text.strip()[:300], line))

    # --- out: the UI ----------------------------------------------------------------------------------------
    def set_view(self, view: tuple | None, line_filter: LineFilter, gen: int) -> None:
        """Focus ``view`` through ``line_filter``: the next ``take`` resets the UI's log to its stored lines."""
        self.view, self.filter, self.view_gen = view, line_filter, gen
        lines = self.store.view(view)
        if line_filter.active:
            lines = [t for t in lines if line_filter.accepts(t)]
        self._pending = deque(lines, maxlen=self.max_lines)
        self._overflow, self._reset = False, True

    def has_news(self) -> bool:
        return bool(self._pending or self._reset or self._status_new or self._events or self._stats_new
                    or (self.finished and not self._finished_sent))

    def take(self) -> Drained:
        """Everything new since the last ``take`` (the UI applies it as one batch)."""
        lines, width = log_ready(list(self._pending))
        reset = self._reset or self._overflow
        self._pending.clear()
        self._overflow = self._reset = False
        status = self._status if self._status_new else None
        self._status_new = False
        events, self._events = self._events, []
        sources = self.store.sources
        stats = {s: SourceStats(sources[s].lines, sources[s].last_time, sources[s].dropped, self.printed.progress(s))
                 for s in self._changed}
        self._changed.clear()
        self._stats_new = False
        self._finished_sent = self.finished
        return Drained(lines, reset, status, events, stats, self.finished, self.skipped, self._rate[2],
                       self.view_gen, width)


def log_ready(lines: list[str]) -> tuple[list[str], int | None]:
    """The lines as textual's Log would keep them (split at every line break str.splitlines() knows, empty
    ones dropped), and the length of the widest when all are ASCII (None: the UI measures cells itself).
    Done here, in the feed process, so that the UI does not scan tens of thousands of lines a second."""
    text = "\n".join(lines)
    if _BREAKS.search(text):
        lines = [part for t in lines for part in t.splitlines()]
    elif not all(lines):
        lines = [t for t in lines if t]
    width = max(map(len, lines), default=0) if text.isascii() else None
    return lines, width
