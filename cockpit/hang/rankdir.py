"""A run's logs/ as the supervisor looks at it several times a second: listed again only when the directory
changed, and its exit records read again only when one may have changed.

At 4,096 ranks logs/ holds some 25,000 files; listing and parsing their names costs about 10 ms, and the
supervisor's poll (5 a second) and the watchdog's look (1 a second) each listed it. A file appended to (a log, a
beat) does not change the directory; a file created, removed or renamed (a rank's first output, its exit
record, a beat file rolled over, a restart's files set aside) does, and moves its mtime. So one ``stat`` of
logs/ tells whether the listing still holds.

The directory's mtime has the file system's clock granularity: a change within the same tick as the listing
keeps the same mtime. A listing is therefore trusted only when it was taken at least ``GUARD_NS`` after the
mtime it saw, and in any case taken again every ``RELIST_EVERY`` seconds (a network file system's cached
attributes).

Exit records are read again while any one of them is not complete (a record is one line, written at once by
the rank wrapper, copied in pieces by the ssh launcher's stream): complete means it ends in a newline and
parses.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from cockpit.fs import safeio
from cockpit.run import layout
from cockpit.run.records import RankExit
from cockpit.run.store import SMALL_FILE_BYTES

GUARD_NS = 50_000_000  # a listing taken this long after the directory's mtime holds until the mtime moves
RELIST_EVERY = 10.0  # seconds: listed again regardless
Names = dict[str, dict[int, tuple[str, str]]]


class RankDir:
    """The rank files of one run's logs/, listed once per change of the directory."""

    def __init__(self, run_dir: Path | str, clock: Callable[[], float] = time.monotonic):
        self.run_dir = run_dir
        self.logs = f"{os.fspath(run_dir)}/{layout.LOGS}"
        self.clock = clock
        self.stamp: int | None = None  # the mtime (ns) of logs/ the cached listings were taken at
        self.trusted = False  # the listing was taken late enough after ``stamp`` to hold until it moves
        self.listed_at = 0.0
        self.cache: dict[frozenset[str], Names] = {}  # by the hosts left out
        self.exit_cache: dict[frozenset[str], dict[int, RankExit]] = {}
        # kept by cockpit.hang.gather, across listings (each checks what it keeps itself):
        self.pids: dict[str, tuple[int, bytes | None]] = {}  # pid file -> the pid it held, and its start time
        # metrics and beat file -> ((inode, size, mtime_ns), its last JSON line): gather.last_json_line's Tails
        self.tails: dict[str, tuple[tuple[int, int, int], dict | None]] = {}
        self.listings = 0  # how many times logs/ was listed (tests, the scale bench)

    def names(self, kinds: tuple[str, ...], skip: frozenset[str] = frozenset()) -> Names:
        """``layout.rank_file_names(run_dir, kinds, skip)``, from the cached listing while logs/ is unchanged.
        The caller must not change what it gets."""
        self._check()
        if skip not in self.cache:  # one listing, every kind of rank file
            began = time.time_ns()
            self.cache[skip] = layout.rank_file_names(self.run_dir, layout.RANK_KINDS, skip)
            self.listings += 1
            self.trusted = self.trusted or (self.stamp is not None and self.stamp <= began - GUARD_NS)
        return {kind: self.cache[skip][kind] for kind in kinds}

    def exits(self, skip: frozenset[str] = frozenset()) -> dict[int, RankExit]:
        """``cockpit.run.store.rank_exits(run_dir, skip=skip)``, read again only when logs/ changed or a record
        was not complete at the last read. The caller must not change what it gets."""
        files = self.names(("exit",), skip)["exit"]
        if skip in self.exit_cache:
            return self.exit_cache[skip]
        out, complete = {}, True
        for rank, (host, path) in files.items():
            try:
                data = safeio.read_bytes(path, SMALL_FILE_BYTES)
                status_text, when = data.decode().split()[:2]
                out[rank] = RankExit(rank, host, int(status_text), float(when))
            except (OSError, ValueError):
                complete = False  # being written right now; the next look will see it whole
                continue
            complete = complete and data.endswith(b"\n")
        if complete and self.trusted:
            self.exit_cache[skip] = out
        return out

    def _check(self) -> None:
        """Drop the cached listings when logs/ changed (or is due to be listed again)."""
        try:
            stamp: int | None = os.stat(self.logs).st_mtime_ns
        except OSError:
            stamp = None
        now = self.clock()
        if stamp != self.stamp or not self.trusted or stamp is None or now - self.listed_at >= RELIST_EVERY:
            self.stamp, self.trusted, self.listed_at = stamp, False, now
            self.cache, self.exit_cache = {}, {}
