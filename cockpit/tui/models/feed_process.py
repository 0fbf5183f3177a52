"""The run feed's process: tails a run, stores and scans its lines, and sends the UI compact batches.

    python -m cockpit.tui.models.feed_process RUN_DIR --parent PID [--max-lines N] [--parse-budget S] [--scan-slice S]

Why a process: in a thread of the UI process, the tailing, storing and scanning of 64 ranks x 1,000 lines/s
held the GIL so often that a key press waited behind it (bench_tui: key p99 134 ms, where a bare textual app
on the same machine and storm answers in under 10 ms). Here it has an interpreter of its own; the UI reads
one frame per batch, applies it, and asks for the next (one batch in flight: a busy UI gets fewer, larger
batches, never a queue of them). Standard library and cockpit's core only: no textual in this process.

The protocol, both ends of which live here:

- UI -> feed (the child's stdin), one JSON object a line: ``{"op": "more"}`` (the UI applied the last batch:
  send the next once there is news) and ``{"op": "view", "gen": N, "view": [host, rank] | null, "level": L,
  "search": S}`` (focus a view: the answer is a batch with ``reset`` and ``view_gen`` N, sent at once).
- feed -> UI (the child's stdout): frames, a 4-byte big-endian length and a pickled ``(text, Drained, progress,
  stats)``; ``text`` is the batch's lines joined by newlines (a tailed line holds none), one string instead of
  thousands (pickling it is a copy, splitting it one C call); ``progress`` and ``stats`` are the status's
  per-rank records and the batch's per-source counts, packed past a few hundred ranks (cockpit.tui.models.feed_pack:
  4,096 ranks' records as objects cost the UI 15-20 ms of GIL to unpickle).

The child never outlives the UI: it exits when its stdin reaches EOF (the UI closed it, or died), when its
parent pid changes (the UI died while another process still holds the pipe), or when the UI stops reading
(a broken pipe).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import sys
import traceback
from dataclasses import replace
from pathlib import Path

from cockpit.tui.models.feed_pack import pack_progress, pack_stats, unpack_progress, unpack_stats
from cockpit.tui.models.feed_state import SCAN_SLICE, Clocks, Drained, FeedState
from cockpit.tui.models.log_filter import LineFilter
from cockpit.tui.models.log_order import SourceClock

PARENT_POLL = 0.5  # seconds between checks that the UI is still our parent
# lines a batch from the tail engine holds at most (about): a live run's history is read in batches of this
# size, each stored and sent on before the next is read. One batch of 4,096 ranks' history held every line as
# an object at once (bench_scale: the feed process at 566 MB); a log storm's batches are far smaller
CATCHUP_BATCH = 20_000
_HEADER = 4


# --- frames (both sides) ---------------------------------------------------------------------------------------
def encode(d: Drained) -> bytes:
    status, progress = pack_progress(d.status) if d.status is not None else (None, None)
    rest = replace(d, lines=[], status=status, stats={})
    body = pickle.dumps(("\n".join(d.lines), rest, progress, pack_stats(d.stats)), protocol=pickle.HIGHEST_PROTOCOL)
    return len(body).to_bytes(_HEADER, "big") + body


def decode(body: bytes) -> Drained:
    text, d, progress, stats = pickle.loads(body)  # noqa: S301 (our own child, over a private pipe)
    d.lines = text.split("\n") if text else []
    if progress is not None and d.status is not None:
        unpack_progress(d.status, progress)
    d.stats = unpack_stats(stats)
    return d


def read_frame(stream) -> bytes | None:
    """The next frame's body from a buffered binary stream; None at its end."""
    header = stream.read(_HEADER)
    if len(header) < _HEADER:
        return None
    size = int.from_bytes(header, "big")
    body = stream.read(size)
    return body if len(body) == size else None


def view_request(gen: int, view: tuple | None, line_filter: LineFilter) -> bytes:
    return (json.dumps({"op": "view", "gen": gen, "view": None if view is None else list(view),
                        "level": line_filter.level, "search": line_filter.search}) + "\n").encode()


MORE = b'{"op": "more"}\n'


# --- the child ---------------------------------------------------------------------------------------------------
class FeedProcess:
    """Follows ``run_dir`` into a FeedState and answers the UI over ``in_fd`` / ``out_fd``."""

    def __init__(self, run_dir: Path, state: FeedState, parent: int, in_fd: int, out_fd: int):
        self.run_dir, self.state, self.parent = run_dir, state, parent
        self.in_fd, self.out_fd = in_fd, out_fd
        self.credit = 1  # batches the UI is ready for
        self._inbox = b""
        self._done: asyncio.Future | None = None
        self.failed = False

    async def main(self) -> None:
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        os.set_blocking(self.in_fd, False)
        loop.add_reader(self.in_fd, self._on_input)
        tasks = [asyncio.create_task(self._follow()), asyncio.create_task(self._watch_parent())]
        try:
            await self._done
        finally:
            loop.remove_reader(self.in_fd)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _end(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    async def _follow(self) -> None:
        from cockpit.run.watch import follow_run

        try:
            await follow_run(self.run_dir, self._on_batch, on_status=self._on_status, batch_lines=CATCHUP_BATCH)
        except Exception:  # the UI reads what went wrong from our stderr once we are gone
            traceback.print_exc()
            self.failed = True
            self._end()
            return
        self.state.finish()
        self._send()

    async def _watch_parent(self) -> None:
        while os.getppid() == self.parent:
            await asyncio.sleep(PARENT_POLL)
        self._end()

    def _on_batch(self, batch) -> None:
        self.state.on_batch(batch)
        self._send()

    def _on_status(self, status) -> None:
        self.state.on_status(status)
        self._send()

    def _on_input(self) -> None:
        try:
            data = os.read(self.in_fd, 1 << 16)
        except BlockingIOError:
            return
        if not data:  # EOF: the UI closed the pipe or is gone
            self._end()
            return
        self._inbox += data
        *lines, self._inbox = self._inbox.split(b"\n")
        for line in lines:
            self._command(json.loads(line))
        self._send()

    def _command(self, cmd: dict) -> None:
        if cmd["op"] == "more":
            self.credit = 1
        elif cmd["op"] == "view":
            view = None if cmd["view"] is None else tuple(cmd["view"])
            self.state.set_view(view, LineFilter(cmd["level"], cmd["search"]), cmd["gen"])
            self.credit = 1  # the UI waits for this answer: it goes out now

    def _send(self) -> None:
        if self.credit <= 0 or not self.state.has_news():
            return
        self.credit -= 1
        data = memoryview(encode(self.state.take()))
        try:
            while data:
                data = data[os.write(self.out_fd, data):]
        except BrokenPipeError:  # the UI stopped reading: it is gone
            self._end()


CLOCK_RANKS = 64  # ranks whose metrics records are read for an ended run's merged order, at most


def run_clocks(run_dir: Path, most: int = CLOCK_RANKS) -> Clocks:
    """What the files say of when each source's lines were written (cockpit.tui.models.log_order): its log's
    mtime, the times of its rank's metrics records by step (cockpit's own or a framework's files, not the
    printed lines, whose times are what is estimated), and when its process started (a rank's pid record's
    mtime, else the run's start), and when each attempt started. Read once, when first asked: only an ended run
    asks.

    At most ``most`` ranks' metrics are read (spread over the ranks): 4,096 ranks' records took 15 s, the
    whole of the TUI's open. The other ranks get, per step, the median of the read ranks' times: ranks that
    train together finish a step within one collective of each other, so the order moves by at most that."""
    known: dict[int, dict[int, float]] = {}
    pooled: dict[int, float] = {}
    paths: dict[tuple, Path] = {}
    pids: dict[int, tuple[str, Path]] = {}
    started: list[float | None] = []  # the run's start, once read
    attempts: dict[int, float] = {}  # when each attempt started, read with it

    def clocks(sources: list[tuple]) -> dict[tuple, SourceClock]:
        from cockpit.run import layout
        from cockpit.run.store import read_status
        from cockpit.run.watch import discover

        if not started:
            ranks = sorted({s[1] for s in sources if isinstance(s[1], int)})
            known.update(_step_times(run_dir, _spread(ranks, most)))
            pooled.update(_median_steps(known.values()) if len(ranks) > most else {})
            status = read_status(run_dir)
            started.append(status.started if status is not None else None)
            attempts.update({a.attempt: a.started for a in status.attempts} if status is not None else {})
        if not paths or any(source not in paths for source in sources):  # an ended run's files: listed once
            paths.update(discover(run_dir))
            pids.update(layout.rank_files(run_dir, "pid"))
        out = {}
        for source in sources:
            rank = source[1] if isinstance(source[1], int) else None
            pid = pids.get(rank) if rank is not None else None
            steps = known.get(rank, pooled) if rank is not None else {}
            out[source] = SourceClock(_mtime(paths.get(source)), steps,
                                      (_mtime(pid[1]) if pid else None) or started[0], attempts)
        return out

    return clocks


def _spread(ranks: list[int], most: int) -> list[int] | None:
    """At most ``most`` of ``ranks``, evenly spread, first and last included; None: all of them."""
    if len(ranks) <= most:
        return None
    return sorted({ranks[round(i * (len(ranks) - 1) / max(1, most - 1))] for i in range(most)})


def _step_times(run_dir: Path, ranks: list[int] | None) -> dict[int, dict[int, float]]:
    """rank -> step -> when its metrics record was written (``ranks`` only, unless None)."""
    from cockpit.plot.series import METRICS
    from cockpit.plot.source import RunSeries
    from cockpit.plot.sources import PRINTED

    reader = RunSeries(run_dir)
    for _ in range(1000):  # what RunSeries.poll_all does, for these ranks
        if not reader.poll(ranks):
            break
    if reader.source() != METRICS:
        return {}
    origins = reader.origins()
    return {s.rank: dict(zip(s.counts, s.times, strict=True)) for s in reader.series(ranks)
            if origins.get(s.rank) != PRINTED}


def _median_steps(tracks) -> dict[int, float]:
    """step -> the median of the tracks' times for it."""
    by_step: dict[int, list[float]] = {}
    for track in tracks:
        for step, t in track.items():
            by_step.setdefault(step, []).append(t)
    return {step: sorted(ts)[len(ts) // 2] for step, ts in by_step.items()}


def _mtime(path: Path | None) -> float | None:
    try:
        return os.stat(path).st_mtime if path is not None else None
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cockpit.tui.models.feed_process", description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--parent", type=int, required=True, help="the UI's pid: exit when it is no longer ours")
    p.add_argument("--max-lines", type=int, default=10_000)
    p.add_argument("--parse-budget", type=float, default=0.15)
    p.add_argument("--scan-slice", type=float, default=SCAN_SLICE)
    args = p.parse_args(argv)
    # frames go to the original stdout; anything else that prints lands on stderr instead of in a frame
    out_fd = os.dup(1)
    os.dup2(2, 1)
    state = FeedState(args.max_lines, args.parse_budget, args.scan_slice, run_clocks(args.run_dir))
    feed = FeedProcess(args.run_dir, state, args.parent, 0, out_fd)
    asyncio.run(feed.main())
    return 1 if feed.failed else 0


if __name__ == "__main__":
    sys.exit(main())
