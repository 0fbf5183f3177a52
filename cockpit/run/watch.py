"""Follow a run from its directory: every rank's log (and each node's torchrun output) as it grows, until
the run reaches a final state. Used by `cockpit run`, `cockpit attach` and `cockpit logs -f`; the TUI
will use it too. Sources are (host, rank) for ranks and (host, "agent") for torchrun's own output."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

from cockpit.logs.tail import Batch, Tailer
from cockpit.run import layout
from cockpit.run.store import RunStatus, rank_files, read_status

DISCOVER_EVERY = 0.25


def discover(run_dir: Path) -> dict[tuple[str, int | str], Path]:
    """Log files of the run that exist now, keyed by source."""
    found: dict[tuple[str, int | str], Path] = {}
    for rank, (host, path) in rank_files(run_dir, "log").items():
        found[(host, rank)] = path
    for host, path in layout.agent_logs(run_dir):
        found[(host, "agent")] = path
    return found


class DirStamp:
    """Has a directory's list of names changed since the last ask? Its mtime says so, except within
    ``SETTLE_S`` of a change: a name added in the same clock tick as the last listing leaves the mtime as it
    was, so a recent mtime counts as a change until it is old enough."""

    SETTLE_S = 1.0

    def __init__(self, path: Path) -> None:
        self.path = path
        self.last: int | None = None

    def changed(self) -> bool:
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except OSError:
            mtime = None
        fresh = mtime is None or time.time() - mtime / 1e9 < self.SETTLE_S
        changed, self.last = fresh or mtime != self.last, mtime
        return changed


class StatusReader:
    """read_status, parsed again only when status.json changed. At 4,096 ranks it is about 1 MB: 20 ms to decode
    and 50 ms to check into 4,096 records, and watch_status looks four times a second while the supervisor writes
    it about once (issue 32: the TUI's feed process spent a fifth of a core on it). Changed: its identity (inode,
    mtime, size; the supervisor replaces it whole) differs, or its mtime is within SETTLE_S of now (a replace in
    the same clock tick can leave mtime and size as they were, on a freed inode handed out again)."""

    SETTLE_S = 0.1

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.stamp: tuple[int, int, int] | None = None
        self.status: RunStatus | None = None

    def read(self) -> RunStatus | None:
        try:
            st = os.stat(self.run_dir / layout.STATUS, follow_symlinks=False)
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp is not None and stamp == self.stamp and time.time() - stamp[1] / 1e9 >= self.SETTLE_S:
            return self.status
        self.status = read_status(self.run_dir)
        self.stamp = stamp if self.status is not None else None  # an unreadable one: read again next time
        return self.status


async def follow_run(run_dir: Path, on_batch: Callable[[Batch], None], *,
                     include: Callable[[tuple], bool] = lambda source: True,
                     until_final: bool = True, on_status: Callable[[RunStatus], RunStatus | None] | None = None,
                     skip_existing: bool = False, last_lines: int | None = None,
                     lossless: bool = False, frames: bool = False,
                     batch_lines: int | None = None) -> RunStatus | None:
    """Deliver batches of lines to ``on_batch`` until the run is final (or forever if not until_final).

    Returns the final status. Lines written before the end are all delivered: once the status is final
    one more discovery and a graceful tail stop read every file to its end. ``skip_existing`` starts the
    files that exist now at their end (attach: only new lines), ``last_lines`` at their last N lines (`logs -f
    -n N`: the tail and what follows in one stream, none twice); files that appear later are read whole.
    ``on_status`` sees every status read and may return a newer one (the caller worked out the end of a
    run whose supervisor died). ``frames``: batches also carry each rank's progress bar while it is drawn
    (cockpit.logs.tail.Batch.frames). ``batch_lines``: batches of about that many lines at most (a live view's
    catch-up of a long run's history: cockpit.logs.tail.Tailer's max_batch_lines)."""
    # lossless (the CLI): also poll quickly when the logs are quiet — the first line after a pause must not
    # wait for a backed-off poll (64 stats every 50 ms cost well under 1% of a core) — and deliver each poll's
    # lines at once: one poll of every file is already a batch, a window on top only adds its length to every
    # line's latency (bench_run: p50 25 -> 6 ms) while a terminal takes 100 writes a second without effort
    tailer = (Tailer(lossless=True, idle_poll_interval=0.05, batch_window=0.0, frames=frames) if lossless else
              Tailer(frames=frames, max_batch_lines=batch_lines))
    followed: set = set()
    first_round = [True]  # the files there when following began: skip_existing / last_lines apply to them
    seen = DirStamp(run_dir / layout.LOGS)

    def add_new(force: bool = False) -> None:
        if not seen.changed() and not force:
            return  # nothing was created, removed or renamed in logs/ (1,024 ranks: a listing costs 2 ms)
        for source, path in sorted(discover(run_dir).items(), key=lambda kv: str(kv[0])):
            if source not in followed and include(source):
                followed.add(source)
                first = first_round[0]
                tailer.add(source, path, from_start=not (first and skip_existing),
                           last_lines=last_lines if first and not skip_existing else None)
        first_round[0] = False

    async def watch_status() -> RunStatus | None:
        status = None
        reader = StatusReader(run_dir)
        while True:
            add_new()
            status = reader.read()  # the same object again while status.json is unchanged
            if on_status is not None and status is not None:
                status = on_status(status) or status  # it may work out a dead supervisor's run again
            if until_final and status is not None and status.final:
                add_new(force=True)
                tailer.stop()
                return status
            await asyncio.sleep(DISCOVER_EVERY)

    watcher = asyncio.create_task(watch_status())
    try:
        async for batch in tailer:
            on_batch(batch)
    finally:
        if not watcher.done():
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        await tailer.aclose()
    return watcher.result() if not watcher.cancelled() else None
