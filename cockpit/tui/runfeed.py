"""A run's live data for the run view, gathered off the UI thread.

``RunFeed.run()`` blocks: a textual thread worker calls it, and it runs ``cockpit.watch.follow_run`` (the tail
engine) on an event loop of its own, so no file is touched on the UI's loop. Each batch of lines is stored
(bounded, see logstore), filtered for the view on screen, and scanned by the log parser for failures; then
``notify()`` is called once, and not again until the UI has called ``drain()``: however fast the ranks write,
the UI gets one wake-up per frame it can handle, never a queue of them.

The live scan has a CPU budget (``parse_budget`` of each second, at most SCAN_SLICE per batch): 64 ranks at
1,000 lines/s each would otherwise keep a core busy and, through the GIL, slow the UI. Lines over the budget
are counted in ``skipped``; the full diagnosis (cockpit.logs.report over the files) sees every line.
No textual here.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cockpit.logs.parse import Event, LineParser
from cockpit.runs import RunStatus
from cockpit.tui.logfilter import LineFilter
from cockpit.tui.logstore import MERGED, LogStore

SCAN_SLICE = 0.005  # seconds of parsing per batch at most


@dataclass(frozen=True)
class LiveEvent:
    """The first failure of a kind on one source; ``line`` is its 1-based line in that source's log file."""

    source: tuple
    kind: str
    text: str
    line: int
    count: int = 1


@dataclass(frozen=True)
class SourceStats:
    lines: int
    last_time: float | None
    dropped: int


@dataclass
class Drained:
    """What arrived since the last drain. ``reset``: the view fell more than a screenful behind; show
    ``lines`` instead of appending them."""

    lines: list[str]
    reset: bool
    status: RunStatus | None
    events: list[LiveEvent]
    stats: dict[tuple, SourceStats]
    finished: bool
    skipped: int = 0
    lines_per_s: float = 0.0


class RunFeed:
    def __init__(self, run_dir: Path, notify: Callable[[], None], max_lines: int = 10_000,
                 parse_budget: float = 0.15, scan_slice: float = SCAN_SLICE):
        self.run_dir = Path(run_dir)
        self._notify = notify
        self.max_lines = max_lines
        self.parse_budget, self.scan_slice = parse_budget, scan_slice
        self._lock = threading.Lock()
        self.store = LogStore(max_lines)
        self._view: tuple | None = MERGED
        self._filter = LineFilter()
        self._pending: deque[str] = deque(maxlen=max_lines)
        self._overflow = False
        self._status: RunStatus | None = None
        self._events: list[LiveEvent] = []
        self._seen: set = set()
        self._posted = False
        self._finished = False
        self._parsers: dict[tuple, LineParser] = {}
        self._count: dict[tuple, int] = {}  # lines fed to each source's parser
        self._offset: dict[tuple, int] = {}  # file line index minus parser line index (drops, skips)
        self._window = (0.0, 0.0)  # (start, seconds spent parsing) of the current 1 s budget window
        self.skipped = 0
        self._rate = (time.monotonic(), 0, 0.0)  # (window start, lines since, last rate)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._stop = threading.Event()

    # --- the worker thread ---------------------------------------------------------------------------------
    def run(self) -> RunStatus | None:
        """Follow the run until it is final or ``stop()`` is called (blocks; call it in a worker thread)."""
        try:
            return asyncio.run(self._main())
        finally:
            with self._lock:
                self._finished = True
            self._wake()

    async def _main(self) -> RunStatus | None:
        from cockpit.watch import follow_run

        self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
        if self._stop.is_set():
            return None
        try:
            status = await follow_run(self.run_dir, self._on_batch, on_status=self._on_status)
        except asyncio.CancelledError:
            return None
        for source, parser in self._parsers.items():
            self._record_events(source, parser.flush())
        self._wake()
        return status

    def stop(self) -> None:
        """End following (from any thread); ``run`` returns soon after."""
        self._stop.set()
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)

    def _on_status(self, status: RunStatus) -> None:
        with self._lock:
            changed = self._status is None or self._status.to_json() != status.to_json()
            self._status = status
        if changed:
            self._wake()

    def _on_batch(self, batch) -> None:
        by_source = batch.by_source()
        with self._lock:
            for source, lines in by_source.items():
                texts = [line.text for line in lines]
                prefixed = self.store.add(source, texts, lines[-1].t_read)
                if self._view is MERGED or self._view == source:
                    self._queue(prefixed if self._view is MERGED else texts)
            for source, count in batch.dropped.items():
                self.store.dropped(source, count)
            start, count, rate = self._rate
            count += len(batch.lines)
            now = time.monotonic()
            self._rate = (now, 0, count / (now - start)) if now - start >= 1.0 else (start, count, rate)
        self._scan(by_source)
        self._wake()

    def _queue(self, texts: list[str]) -> None:
        accepted = [t for t in texts if self._filter.accepts(t)] if self._filter.active else texts
        if len(self._pending) + len(accepted) > self.max_lines:
            self._overflow = True
        self._pending.extend(accepted)

    def _scan(self, by_source: dict) -> None:
        """Feed the parser within the budget; a batch gets at most SCAN_SLICE seconds (the UI thread waits for
        the GIL while this runs), the rest of it is counted in ``skipped``."""
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
            with self._lock:
                if key in self._seen:
                    continue
                self._seen.add(key)
                line = e.line + self._offset.get(source, 0)
                self._events.append(LiveEvent(source, e.kind, e.text.strip()[:300], line))

    def _wake(self) -> None:
        with self._lock:
            if self._posted:
                return
            self._posted = True
        self._notify()

    # --- the UI thread --------------------------------------------------------------------------------------
    def drain(self) -> Drained:
        """Everything new since the last drain; re-arms ``notify``."""
        with self._lock:
            lines, reset = list(self._pending), self._overflow
            self._pending.clear()
            self._overflow = False
            events, self._events = self._events, []
            stats = {s: SourceStats(log.lines, log.last_time, log.dropped) for s, log in self.store.sources.items()}
            self._posted = False
            rate = self._rate[2]
            return Drained(lines, reset, self._status, events, stats, self._finished, self.skipped, rate)

    def set_view(self, view: tuple | None, line_filter: LineFilter) -> list[str]:
        """Show ``view`` (a source, or MERGED) through ``line_filter``: returns the lines to show now; later
        lines come through ``drain``."""
        with self._lock:
            self._view, self._filter = view, line_filter
            self._pending.clear()
            self._overflow = False
            lines = self.store.view(view)
        if line_filter.active:
            lines = [t for t in lines if line_filter.accepts(t)]
        return lines

    def sources(self) -> list[tuple]:
        with self._lock:
            return list(self.store.sources)
