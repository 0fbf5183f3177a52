"""Which followed files the tail engine (cockpit.logs.tail) must poll now: those inotify events name, those left
with something to read, and those in directories it cannot watch (NFS, Lustre, missing yet, no inotify here)
when their turn comes. Standard library only; the kernel side is cockpit.logs.notify.

A file that no watch covers is polled on its own schedule: again after ``poll`` seconds while it gives lines,
twice as long after each poll that gives none, up to a ceiling. The ceiling is the caller's quiet pace, raised
so that all quiet files together cost at most ``QUIET_POLLS_PER_S`` polls a second (a poll of a quiet file is
a stat and a few us of Python), and never above ``MAX_QUIET_S``: 64 files keep the quiet pace they had, 1,024
quiet files on NFS are polled once a second each instead of every 50 ms (the engine alone, idle: 5.3% of a core
-> 0.4%, bench_idle.py --engine), the first line after a pause waiting at most that, as with tail -F there (it
polls each file once a second).
Quiet files' turns fall on a grid of half the quiet pace, so that one wake polls many.
"""

from __future__ import annotations

import heapq
import itertools
import math
import os
from collections.abc import Hashable

from cockpit.logs.notify import Changes

QUIET_POLLS_PER_S = 1000  # polls a second of all the quiet files together, where no watch covers them
MAX_QUIET_S = 1.0  # the longest a quiet file waits for its next poll


class DueSources:
    """Sources by (directory, name), the inotify descriptor watching their directories, the sources to poll
    next time whatever the events say, and the turns of those no watch covers (``notify=False``, or no inotify
    here: every source)."""

    def __init__(self, notify: bool, poll: float = 0.01, quiet: float = 0.25) -> None:
        """``poll``: how soon a polled source that gave lines is polled again; ``quiet``: the least ceiling of the
        back-off of one that gives none (see the module docstring)."""
        self._notify = notify
        self._poll, self._quiet = poll, quiet
        self._changes: Changes | None = None  # opened when the poll loop starts (watch_again)
        self._named: dict[tuple[str, str], list[Hashable]] = {}  # (directory, name) -> its sources
        self._by_dir: dict[str, set[Hashable]] = {}  # directory -> its sources
        self._dir_of: dict[Hashable, str] = {}
        self._again: set[Hashable] = set()
        # sources no watch covers: (when to poll next, the back-off interval); the heap holds (when, tick, source)
        # and may hold stale entries (a source polled earlier than planned), skipped when popped
        self._next: dict[Hashable, tuple[float, float]] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._tick = itertools.count()

    @property
    def changes(self) -> Changes | None:
        """The inotify descriptor (None: everything is polled)."""
        return self._changes

    def add(self, source: Hashable, path: str) -> None:
        directory, name = os.path.split(os.path.abspath(path))
        self._dir_of[source] = directory
        self._named.setdefault((directory, name), []).append(source)
        self._by_dir.setdefault(directory, set()).add(source)
        if self._changes is not None:
            self._changes.watch(directory)
        self._again.add(source)

    def remove(self, source: Hashable, path: str) -> None:
        directory, name = os.path.split(os.path.abspath(path))
        self._again.discard(source)
        self._dir_of.pop(source, None)
        self._next.pop(source, None)
        named = self._named.get((directory, name), [])
        if source in named:
            named.remove(source)
            if not named:
                del self._named[(directory, name)]
        in_dir = self._by_dir.get(directory, set())
        in_dir.discard(source)
        if not in_dir:
            self._by_dir.pop(directory, None)

    def again(self, source: Hashable) -> None:
        """Poll ``source`` next time (unread bytes, a full lossless buffer, a file no longer at its path)."""
        self._again.add(source)

    def pending(self) -> bool:
        """Are there sources to poll whatever the events say and the schedule (which the caller polls at its
        own pace)?"""
        return bool(self._again)

    def next_poll(self) -> float | None:
        """When the earliest scheduled poll of a source no watch covers is due (None: none is scheduled)."""
        heap = self._heap
        while heap and self._next.get(heap[0][2], (None,))[0] != heap[0][0]:
            heapq.heappop(heap)  # stale: polled since, or removed
        return heap[0][0] if heap else None

    def polled(self, source: Hashable, got: bool, now: float) -> None:
        """``source`` was polled at ``now`` (``got``: it gave lines): schedule its next poll where no watch covers
        it, sooner while it gives lines, later while it is quiet."""
        changes = self._changes
        directory = self._dir_of.get(source)
        if directory is None or (changes is not None and changes.watching(directory)):
            self._next.pop(source, None)  # its events say when to read it
            return
        last = self._next.get(source)
        ceiling = min(MAX_QUIET_S, max(self._quiet, len(self._next) / QUIET_POLLS_PER_S))
        interval = self._poll if got or last is None else min(last[1] * 2, ceiling)
        when = now + interval
        if interval >= self._quiet:  # quiet files share their turns (one wake polls many): a grid of quiet / 2
            grid = self._quiet / 2
            when = math.ceil(when / grid) * grid
        self._next[source] = (when, interval)
        heapq.heappush(self._heap, (when, next(self._tick), source))

    def due(self, followed: int, now: float) -> set[Hashable] | None:
        """The sources to poll now (None: all of them). Reading the events every time keeps the queue short."""
        due, self._again = self._again, set()
        heap = self._heap
        while heap and heap[0][0] <= now:
            when, _, source = heapq.heappop(heap)
            if self._next.get(source, (None,))[0] == when:
                due.add(source)
        changes = self._changes
        if changes is None:
            return due
        # decoding an event costs about what polling a file does: past one event for every 2 files, poll them all
        changed = changes.read(max(1024, 16 * followed))
        if changed.everything:
            return None
        for directory in changed.gone:  # removed or moved: watch the path again, and read what is there
            changes.watch(directory)
            due.update(self._by_dir.get(directory, ()))
        for directory, names in changed.names.items():
            for name in names:
                due.update(self._named.get((directory, name), ()))
        return due

    def watch_again(self) -> None:
        """Watch the directories not watched yet (missing then, or the kernel's limit reached). The first call
        opens the inotify descriptor (the poll loop's start: a Tailer never started holds none)."""
        if self._notify and self._changes is None:
            self._changes = Changes.open()
            self._notify = self._changes is not None  # none to be had (the per-user limit): poll everything
        if self._changes is not None:
            for directory in self._by_dir:
                self._changes.watch(directory)

    def close(self) -> None:
        self._notify = False
        changes, self._changes = self._changes, None
        if changes is not None:
            changes.close()
