"""Follow many growing log files at once (one per rank) and deliver their lines in batches.

Why it is shaped so:

- Polling (``os.stat`` + ``read`` of the new bytes) reads the files: portable, works on the shared
  filesystems (NFS, Lustre) where run directories live, and costs one ``stat`` per file per poll. The poll
  interval adapts per file: ``poll_interval`` while it gives lines, doubling up to ``idle_poll_interval`` when
  quiet, and further where many quiet files would cost more than a small budget of stats a second
  (cockpit.logs.due: 1,024 quiet files are polled once a second each; idle, 5.3% of a core -> 0.4%).
- Which files to poll comes from inotify where the directory is on a local file system (cockpit.logs.notify):
  only the files named in events (and those not watched) are polled, and a quiet run waits on the inotify
  descriptor instead of waking to stat every file (`logs -f` on 1,024 quiet files: 7.1% of a core, now 0.4%). A
  slow full poll every ``full_poll_interval`` stays as a safety net; ``notify=False`` polls everything.
- File IO runs on the event loop's thread in small bounded steps (per file and poll: one ``stat`` and at most
  ``max_read_bytes``). A worker thread bought nothing on the 64 x 1,000 lines/s benchmark (p50 40 ms vs 33 ms
  inline) and would, with the GIL, wait after each of its ~128 syscalls per poll whenever the consumer's
  thread is busy (the convoy effect). A face that must never touch files on its UI loop can run the whole
  Tailer in a thread with its own loop.
- Lines wait in one bounded buffer per source that drops the OLDEST line when full and counts the drop. The
  files are the durable record; the buffer only bridges to a consumer that may fall behind, and a live view
  wants the newest lines. We only read, so writers are never blocked. ``lossless=True`` (the CLI's
  `run`, `attach`, `logs -f`, which must show every line) reads no more of a source whose buffer is full
  until it is delivered: the backlog stays in the file, and each batch says how many bytes are unread.
- Delivery is batched: lines read within ``batch_window`` of the first undelivered line go out together, so
  64 ranks x 1,000 lines/s is a few dozen deliveries a second rather than 64,000.

FileFollower is the synchronous reader of one file (usable on its own); Tailer schedules many of them.
Imports only the standard library (no textual, no torch).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass, field

from cockpit.logs.due import DueSources
from cockpit.logs.filetail import FileFollower, Line

__all__ = ["Batch", "FileFollower", "Line", "SourceState", "Tailer"]


@dataclass(frozen=True)
class Batch:
    """Lines delivered together: grouped by source (in add order), each source's lines in file order.

    dropped maps a source to the number of its lines dropped (oldest first) since the previous batch;
    sources without drops are absent.
    """

    lines: list[Line]
    dropped: dict[Hashable, int] = field(default_factory=dict)
    behind_bytes: int = 0
    """lossless Tailers: bytes left unread in the files because the consumer is behind (0: keeping up)."""
    frames: dict[Hashable, str | None] = field(default_factory=dict)
    """Tailers with ``frames``: a source's progress bar as it is drawn now (FileFollower.frame: the latest "\\r"
    frame of its line not ended yet), for the sources whose frame changed since the previous batch; None: its
    bar line ended (its Line is in ``lines``) or holds no "\\r" any more."""

    def by_source(self) -> dict[Hashable, list[Line]]:
        """The lines grouped by source, in delivery order."""
        out: dict[Hashable, list[Line]] = {}
        for line in self.lines:
            out.setdefault(line.source, []).append(line)
        return out


@dataclass(frozen=True)
class SourceState:
    """A snapshot of one source, for display ("waiting for rank 7's log").

    is_open is False while the path does not exist (yet) or cannot be read; offset is the bytes read from the
    current file; lines counts lines read (the next seq); error is None when all is well.
    """

    path: str
    is_open: bool
    offset: int
    lines: int
    dropped: int
    rotations: int
    truncations: int
    error: str | None


class _Entry:
    """One followed source: its follower and its bounded buffer of undelivered lines."""

    __slots__ = ("follower", "buffer", "dropped", "frame")

    def __init__(self, follower: FileFollower, maxlen: int | None) -> None:
        self.follower = follower
        self.buffer: collections.deque[Line] = collections.deque(maxlen=maxlen)
        self.dropped = 0
        self.frame: str | None = None  # the progress-bar frame last delivered (Batch.frames)


class Tailer:
    """Follows many files, each under a caller-given hashable source key, and yields Batches.

    Use from one event loop: ``add``/``remove``/``stop`` are plain calls, ``next_batch``/``batches`` await
    (polling starts with the first of those). ``stop()`` ends gracefully: a final read, partial lines
    flushed, every line delivered, then iteration ends. ``aclose()`` (also ``async with``) ends at once,
    closing the files; undelivered lines are discarded.
    """

    def __init__(self, *, poll_interval: float = 0.01, idle_poll_interval: float = 0.25,
                 batch_window: float = 0.025, max_buffered_lines_per_source: int = 10_000,
                 max_line_bytes: int = 64 * 1024, max_read_bytes: int = 256 * 1024, lossless: bool = False,
                 notify: bool = True, full_poll_interval: float = 5.0, frames: bool = False,
                 max_batch_lines: int | None = None) -> None:
        """``frames``: also deliver each source's progress bar while it is drawn (Batch.frames), for a live view
        that shows a line before its newline. ``max_batch_lines``: no source is read while that many lines wait
        to be delivered (the others are read once they are): a catch-up of 4,096 files' history comes in
        batches of about that size (plus one file's read), not one batch holding all of it."""
        if not (0 < poll_interval <= idle_poll_interval <= full_poll_interval and batch_window >= 0
                and max_buffered_lines_per_source >= 1):
            raise ValueError("need 0 < poll_interval <= idle_poll_interval <= full_poll_interval, batch_window >= 0, "
                             "a buffer >= 1")
        self._poll, self._idle, self._window = poll_interval, idle_poll_interval, batch_window
        self._full_every = full_poll_interval
        self._due = DueSources(notify, poll_interval, idle_poll_interval)
        self._maxlen = max_buffered_lines_per_source
        self._lossless = lossless
        self._gated = False  # lossless: a source was not read because its buffer was full
        self._max_batch = max_batch_lines
        self._held = False  # max_batch_lines: sources were not read because the batch waiting is full
        self._follower_opts = {"max_line_bytes": max_line_bytes, "max_read_bytes": max_read_bytes}
        self._entries: dict[Hashable, _Entry] = {}
        self._pending_lines = 0
        self._pending_dropped: dict[Hashable, int] = {}
        self._frames = frames
        self._pending_frames: dict[Hashable, str | None] = {}
        self._first_pending = 0.0
        self._ready = asyncio.Event()  # lines are waiting, or polling has ended
        self._wake = asyncio.Event()  # poll now: a source was added, or stop() was called
        self._stopping = False
        self._finished = False
        self._task: asyncio.Task[None] | None = None

    @property
    def sources(self) -> tuple[Hashable, ...]:
        """The sources followed, in the order they were added."""
        return tuple(self._entries)

    def add(self, source: Hashable, path: str | os.PathLike[str], *, from_start: bool = True,
            last_lines: int | None = None) -> None:
        """Follow path under source. from_start=False skips what the file holds now (if it exists);
        last_lines=N starts at its last N lines (`tail -f -n N`)."""
        if self._stopping:
            raise RuntimeError("this Tailer was stopped (hint: create a new one)")
        if source in self._entries:
            raise ValueError(f"source {source!r} is already followed (hint: remove it first)")
        follower = FileFollower(source, path, from_start=from_start, last_lines=last_lines,
                                **self._follower_opts)
        self._entries[source] = _Entry(follower, None if self._lossless else self._maxlen)
        self._due.add(source, follower.path)
        self._wake.set()

    def remove(self, source: Hashable) -> None:
        """Stop following source and close its file; its undelivered lines are discarded."""
        entry = self._entries.pop(source, None)
        if entry is not None:
            self._due.remove(source, entry.follower.path)
            entry.follower.close()
            self._pending_lines -= len(entry.buffer)
            self._pending_dropped.pop(source, None)
            self._pending_frames.pop(source, None)

    def state(self, source: Hashable) -> SourceState | None:
        """A snapshot of source, or None if it is not followed."""
        entry = self._entries.get(source)
        if entry is None:
            return None
        f = entry.follower
        return SourceState(f.path, f.is_open, f.offset, f.seq, entry.dropped, f.rotations, f.truncations,
                           f.error)

    def stop(self) -> None:
        """Finish gracefully: one final read, partial lines flushed, then iteration ends."""
        self._stopping = True
        self._wake.set()

    async def aclose(self) -> None:
        """End at once: stop polling and close the files; undelivered lines are discarded."""
        self._stopping = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.wait([self._task])
        self._finished = True
        self._close_all()

    async def __aenter__(self) -> Tailer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncIterator[Batch]:
        return self.batches()

    async def batches(self) -> AsyncIterator[Batch]:
        """Yield batches until stop() has delivered everything."""
        while (batch := await self.next_batch()) is not None:
            yield batch

    async def next_batch(self) -> Batch | None:
        """Wait for the next batch; None once stopped and drained. Raises what broke the poll loop."""
        loop = asyncio.get_running_loop()
        if self._task is None and not self._finished:
            self._task = loop.create_task(self._run())
        while True:
            if self._pending_lines or self._pending_dropped or self._pending_frames:
                wait = self._first_pending + self._window - loop.time()
                if wait <= 0 or self._finished:
                    return self._drain()
                await asyncio.sleep(wait)
            elif self._finished:
                if self._task is not None and not self._task.cancelled() and self._task.exception():
                    raise RuntimeError("the tail poll loop failed") from self._task.exception()
                return None
            else:
                self._ready.clear()
                await self._ready.wait()

    def _drain(self) -> Batch:
        lines: list[Line] = []
        for entry in self._entries.values():
            if entry.buffer:
                lines.extend(entry.buffer)
                entry.buffer.clear()
        behind = 0
        if self._gated:  # read on at once: the consumer has taken what was buffered
            behind = sum(e.follower.unread for e in self._entries.values())
            self._gated = False
            self._wake.set()
        if self._held:
            self._held = False
            self._wake.set()
        batch = Batch(lines, self._pending_dropped, behind, self._pending_frames)
        self._pending_lines, self._pending_dropped, self._pending_frames = 0, {}, {}
        return batch

    async def _run(self) -> None:
        """The poll loop: read the files due, rest adaptively; on stop a final read that flushes partials."""
        loop = asyncio.get_running_loop()
        interval, next_full = self._poll, 0.0
        try:
            while not self._stopping:
                self._wake.clear()
                now = loop.time()
                full = now >= next_full
                if full:
                    next_full = now + self._full_every
                    self._due.watch_again()
                due = self._due.due(len(self._entries), now)
                got = self._poll_all(final=False, only=None if full else due, now=now)
                interval = self._poll if got else min(interval * 2, self._idle)
                # data flowing: poll again after poll_interval (events queue meanwhile). Quiet: a file left with
                # something to read at the backed-off interval; one no watch covers when its own backed-off turn
                # comes (DueSources.polled); the rest waits for an event (or the full poll).
                turn = self._due.next_poll()
                wake = next_full if turn is None else min(next_full, turn)
                quiet = interval if self._due.pending() else max(wake - now, self._poll)
                await self._rest(interval if got else quiet, listen=not got)
            self._poll_all(final=True)
        finally:
            self._finished = True
            self._ready.set()
            self._close_all()

    async def _rest(self, seconds: float, *, listen: bool) -> None:
        """Sleep ``seconds``; a wake (add, stop, a drained lossless buffer) ends it early, and so, with
        ``listen``, does an inotify event after the first poll_interval (a file written many times a second, or
        a busy directory, is read in batches, not once per event)."""
        changes = self._due.changes
        if not listen or changes is None or seconds <= self._poll:
            await self._sleep(seconds)
            return
        await self._sleep(self._poll)
        if self._wake.is_set():
            return
        loop = asyncio.get_running_loop()
        loop.add_reader(changes.fileno(), self._wake.set)
        try:
            await self._sleep(seconds - self._poll)
        finally:
            loop.remove_reader(changes.fileno())

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    def _close_all(self) -> None:
        for entry in self._entries.values():
            entry.follower.close()
        self._due.close()

    def _poll_all(self, *, final: bool, only: set[Hashable] | None = None, now: float = 0.0) -> int:
        """Poll the followers (``only`` these, or all) into their buffers (final: to the end of the file,
        partials flushed); ``now``: the loop's time, for the next turn of a file no watch covers."""
        total, was_empty = 0, not (self._pending_lines or self._pending_dropped or self._pending_frames)
        sources = self._entries if only is None else [s for s in only if s in self._entries]
        for source in sources:
            entry = self._entries[source]
            follower = entry.follower
            if self._max_batch is not None and not final and self._pending_lines >= self._max_batch:
                self._held = True  # read once this batch is taken
                self._due.again(source)
                continue
            if self._lossless and not final and len(entry.buffer) >= self._maxlen:
                self._gated = True  # the file keeps the backlog; read on once the consumer caught up
                self._due.again(source)
                continue
            lines = follower.poll()
            while final and follower.behind:
                total += self._push(source, entry, lines)
                lines = follower.poll()
            if final:
                follower.flush(lines)
            elif follower.behind or follower.detached:
                self._due.again(source)
            news = self._push(source, entry, lines)
            if self._frames and follower.frame != entry.frame:
                entry.frame = self._pending_frames[source] = follower.frame
                news += 1  # a frame is news: deliver it, and poll on quickly while the bar moves
            if not final:
                self._due.polled(source, news > 0, now)
            total += news
        if total:
            if was_empty:
                self._first_pending = asyncio.get_running_loop().time()
            self._ready.set()
        return total

    def _push(self, source: Hashable, entry: _Entry, lines: list[Line]) -> int:
        """Append to the bounded buffer, counting the oldest lines it pushes out."""
        before = len(entry.buffer)
        entry.buffer.extend(lines)
        dropped = before + len(lines) - len(entry.buffer)
        if dropped:
            entry.dropped += dropped
            self._pending_dropped[source] = self._pending_dropped.get(source, 0) + dropped
        self._pending_lines += len(entry.buffer) - before
        return len(lines)
