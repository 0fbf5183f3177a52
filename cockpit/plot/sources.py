"""Where a run's metric points come from besides cockpit's own ``metrics/rank-R.jsonl``: the seam that lets a script
that never heard of cockpit reach its charts, forecast and sweep tables unchanged. cockpit.plot.source.RunSeries
polls every source and keeps, per rank, the points of the FIRST source in ``ORDER`` that has any for that rank:

    metrics        metrics/rank-R.jsonl: cockpit.train's records, or a script's own {"step", "time", "loss"}
    trainer_state  Hugging Face Trainer's trainer_state.json (log_history) in the run's workdir (rank 0)
    lightning_csv  Lightning's CSVLogger file, <workdir>/**/version_N/metrics.csv (rank 0)
    tensorboard    TensorBoard event files under the run directory or the workdir (the writer's rank, else 0;
                   cockpit.plot.tensorboard_files, when the tensorboard package is installed)
    printed        the rank's printed progress lines in logs/rank-R.HOST.log (cockpit.plot.printed)

A source hands back, per rank, the points it read at this poll and whether they replace what it gave before (a
file rewritten whole) or follow it (a log read on from where the last poll ended). A point is (step, time, loss).

Printed lines carry no time of their own: a line's time is interpolated by byte offset between two reads of its
log (the log's modification time at each read; the rank's pid file, written when it started, before the first).
So a live view places a line within a poll interval, and a finished run read in one go shows its mean rate.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from pathlib import Path
from typing import Protocol

from cockpit.fs import safeio
from cockpit.plot.printed import StepCount, readings
from cockpit.run import layout

Point = tuple[int, float, float | None]
Polled = dict[int, tuple[list[Point], bool]]  # rank -> (points, whether they replace the source's earlier ones)
METRICS, TRAINER_STATE, LIGHTNING_CSV, PRINTED = "metrics", "trainer_state", "lightning_csv", "printed"
TENSORBOARD = "tensorboard"
# precedence: the first with points for a rank wins
ORDER = (METRICS, TRAINER_STATE, LIGHTNING_CSV, TENSORBOARD, PRINTED)
WHERE = {METRICS: "metrics/rank-R.jsonl", TRAINER_STATE: "trainer_state.json in the workdir",
         LIGHTNING_CSV: "Lightning's metrics.csv in the workdir",
         TENSORBOARD: "TensorBoard event files in the run directory or the workdir",
         PRINTED: "printed progress lines in the rank's log"}
CHUNK = 4 << 20  # bytes of one log read per poll: a poll's time is bounded however far behind it is
MAX_LINE = 1 << 16  # a longer line without its newline is dropped up to it (memory stays bounded)
TAIL = 1 << 20  # printed_tail: the bytes of a log's end read for a forecast
_LOSS = re.compile(rb"loss", re.IGNORECASE)


class MetricSource(Protocol):
    """One place points come from. ``poll(skip)``: what arrived since the last poll, ranks in ``skip`` (won by a
    source before this one) left unread."""

    name: str

    def poll(self, skip: Collection[int]) -> Polled: ...


class _Log:
    """One rank's log, read on from an offset; ``anchor`` is (time, offset) of the last read's end."""

    def __init__(self, path: Path, started: float | None, start_at: int = 0):
        """``start_at`` > 0: read from there (a tail), the line cut there dropped; lines without a step of their
        own are left out then, as their count is not known."""
        self.path, self.offset, self.partial, self.skipping = path, start_at, b"", start_at > 0
        self.anchor: tuple[float, int] | None = None if started is None else (started, 0)
        self.count = StepCount(counting=start_at == 0)  # the step of a line without one: its count

    def read(self) -> list[tuple[bytes, float]]:
        """The whole lines appended since the last read, each with its interpolated time."""
        try:
            with safeio.open_regular(self.path) as f:
                st = os.fstat(f.fileno())
                if st.st_size < self.offset:  # replaced: read again from its start
                    self.offset, self.partial, self.skipping, self.count = 0, b"", False, StepCount()
                    self.anchor = None if self.anchor is None else (self.anchor[0], 0)
                f.seek(self.offset)
                data = f.read(CHUNK)
        except OSError:
            return []
        if not data:
            return []
        t0, o0 = self.anchor if self.anchor is not None else (st.st_mtime, self.offset)
        t0 = min(t0, st.st_mtime)
        span = max(st.st_size - o0, 1)

        def at(offset: int) -> float:
            return t0 + (st.st_mtime - t0) * (offset - o0) / span

        out: list[tuple[bytes, float]] = []
        pos = self.offset - len(self.partial)
        *whole, partial = (self.partial + data).split(b"\n")
        for line in whole:
            pos += len(line) + 1
            if self.skipping:
                self.skipping = False
            else:
                out.append((line, at(pos)))
        self.offset += len(data)
        self.anchor = (at(self.offset), self.offset)
        self.partial = b"" if len(partial) > MAX_LINE or self.skipping else partial
        self.skipping = self.skipping or len(partial) > MAX_LINE
        return out

    def points(self) -> list[Point]:
        out: list[Point] = []
        for raw, time in self.read():
            if not _LOSS.search(raw):  # most lines: no loss, no need to decode and parse them
                continue
            for reading in readings(raw.decode("utf-8", "replace")):  # a progress bar's frames: each on its own
                step = self.count.step(reading)
                if step is not None:
                    out.append((step, time, reading.loss))
        return out


class PrintedLines:
    """The ranks' printed progress lines (cockpit.plot.printed), read incrementally from logs/."""

    name = PRINTED

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self._logs: dict[int, _Log] = {}

    def poll(self, skip: Collection[int]) -> Polled:
        out: Polled = {}
        files = layout.rank_file_names(self.run_dir, ("pid", "log"))  # one listing, paths as text: 4,096 ranks
        pids = files["pid"]
        for rank, (_host, name) in sorted(files["log"].items()):
            if rank in skip:
                continue
            log, path = self._logs.get(rank), Path(name)
            if log is None or log.path != path:
                log = self._logs[rank] = _Log(path, _mtime(Path(pids[rank][1])) if rank in pids else None)
            points = log.points()
            if points:
                out[rank] = (points, False)
        return out


def printed_tail(run_dir: Path, rank: int, tail: int = TAIL) -> list[Point]:
    """A rank's printed points from the last ``tail`` bytes of its log (a forecast's read, bounded however long
    the log): all of them when the log is no longer, else those whose line names its step."""
    found = layout.rank_files(run_dir, "log").get(rank)
    if found is None:
        return []
    path = found[1]
    pid = layout.rank_files(run_dir, "pid").get(rank)
    try:
        size = path.stat().st_size
    except OSError:
        return []
    return _Log(path, _mtime(pid[1]) if pid else None, max(0, size - tail)).points()


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None
