"""Which followed files the tail engine (cockpit.logs.tail) must poll now: those inotify events name, those in
directories it cannot watch (NFS, Lustre, missing yet), and those left with something to read. Standard
library only; the kernel side is cockpit.logs.notify.
"""

from __future__ import annotations

import os
from collections.abc import Hashable

from cockpit.logs.notify import Changes


class DueSources:
    """Sources by (directory, name), the inotify descriptor watching their directories, and the sources to poll
    next time whatever the events say. ``notify=False``, or no inotify here: every source is always due."""

    def __init__(self, notify: bool) -> None:
        self._notify = notify
        self._changes: Changes | None = None  # opened when the poll loop starts (watch_again)
        self._named: dict[tuple[str, str], list[Hashable]] = {}  # (directory, name) -> its sources
        self._by_dir: dict[str, set[Hashable]] = {}  # directory -> its sources
        self._again: set[Hashable] = set()

    @property
    def changes(self) -> Changes | None:
        """The inotify descriptor (None: everything is polled)."""
        return self._changes

    def add(self, source: Hashable, path: str) -> None:
        directory, name = os.path.split(os.path.abspath(path))
        self._named.setdefault((directory, name), []).append(source)
        self._by_dir.setdefault(directory, set()).add(source)
        if self._changes is not None:
            self._changes.watch(directory)
        self._again.add(source)

    def remove(self, source: Hashable, path: str) -> None:
        directory, name = os.path.split(os.path.abspath(path))
        self._again.discard(source)
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
        """Are there sources to poll whatever the events say (which the caller polls at its own pace)?"""
        return self._changes is None or bool(self._again) or bool(self.unwatched())

    def due(self, followed: int) -> set[Hashable] | None:
        """The sources to poll now (None: all of them). Reading the events every time keeps the queue short."""
        changes = self._changes
        if changes is None:
            return None
        # decoding an event costs about what polling a file does: past one event for every 2 files, poll them all
        changed = changes.read(max(1024, 16 * followed))
        if changed.everything:
            return None
        due, self._again = self._again, set()
        for directory in changed.gone:  # removed or moved: watch the path again, and read what is there
            changes.watch(directory)
            due.update(self._by_dir.get(directory, ()))
        for directory, names in changed.names.items():
            for name in names:
                due.update(self._named.get((directory, name), ()))
        due.update(self.unwatched())
        return due

    def unwatched(self) -> list[Hashable]:
        changes = self._changes
        if changes is None:
            return [s for sources in self._by_dir.values() for s in sources]
        return [s for d, sources in self._by_dir.items() if not changes.watching(d) for s in sources]

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
