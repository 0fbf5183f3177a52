"""A run's chart data from its files, read as they grow: ``metrics/rank-R.jsonl`` (cockpit.train's records, or
any script's ``{"step", "time", "loss"}`` lines); for a rank with none, what its framework or its prints left
(cockpit.plot.sources: the first source in ORDER with points for a rank wins); and the rank hook's
``logs/rank-R.HOST.beat`` (once a second: collectives called, seconds waited inside them): the wait-share
chart's data, and the rate's for a run whose ranks write no metrics.

Incremental: each poll reads only the bytes added since the last one (at most ``CHUNK`` per file per poll, so
a poll's time is bounded however far behind it is) and keeps a partial last line for the next poll. A file
that shrank (a beat file starts over past 256 KiB, a metrics file replaced) is read again from its start;
points already kept stay. A line that is not a record is skipped. IO happens in ``poll`` only: call it from
a worker in the TUI.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path

from cockpit.fs import safeio
from cockpit.plot import sources
from cockpit.plot.framework_files import framework_sources
from cockpit.plot.series import BEATS, METRICS, RankSeries, Track
from cockpit.plot.tensorboard_files import TensorBoardFiles
from cockpit.run import layout
from cockpit.run.status import RunStatus

CHUNK = 4 << 20
MAX_RECORD = 1 << 20  # a metrics record or a beat is ~200 bytes
_METRICS_NAME = re.compile(r"^rank-(\d+)\.jsonl$")


class _File:
    def __init__(self, path: Path):
        self.path, self.offset, self.partial = path, 0, b""
        self.skipping = False  # inside a line longer than MAX_RECORD: dropped up to its newline
        self.error: str | None = None  # why the file is not read (a FIFO, a device, a symlink)

    def read(self) -> list[bytes]:
        """The whole lines appended since the last read. A regular file only, never through a link
        (cockpit.fs.safeio: a FIFO is not waited on, /dev/zero not read); a record longer than MAX_RECORD
        without its newline is dropped, so memory stays bounded whatever the file holds."""
        try:
            with safeio.open_regular(self.path) as f:
                if os.fstat(f.fileno()).st_size < self.offset:
                    self.offset, self.partial, self.skipping = 0, b"", False
                f.seek(self.offset)
                data = f.read(CHUNK)
        except FileNotFoundError:
            return []
        except OSError as exc:
            self.error = exc.strerror or str(exc)
            return []
        self.error = None
        if not data:
            return []
        self.offset += len(data)
        *whole, partial = (self.partial + data).split(b"\n")
        if self.skipping and whole:
            whole, self.skipping = whole[1:], False  # the rest of the over-long record
        if len(partial) > MAX_RECORD or self.skipping:
            partial, self.skipping = b"", True
        self.partial = partial
        return whole


class RunSeries:
    """The ranks' tracks of one run directory; ``poll`` brings them up to date.

    ``version`` counts the polls that brought points: what was built from the series (a chart, a band) at one
    version is still right at that version. Between such polls ``series``, ``beats`` and ``span`` hand back
    what they built the first time (the same RankSeries objects), so drawing again reads, sorts and copies
    nothing."""

    def __init__(self, run_dir: Path, keep: int = 500):
        self.run_dir, self.keep = Path(run_dir), keep
        self._files: dict[tuple[str, int], _File] = {}
        # (origin, rank): origin is BEATS or one of sources.ORDER (METRICS: cockpit's own file)
        self._tracks: dict[tuple[str, int], Track] = {}
        self._tensorboard = TensorBoardFiles(self.run_dir)
        self._others: list[sources.MetricSource] = [*framework_sources(self.run_dir), self._tensorboard,
                                                    sources.PrintedLines(self.run_dir)]
        self.version = 0
        # built at ``version``: the series lists asked for (by source and ranks), and the span (once asked)
        self._lists: dict[tuple[str | None, frozenset[int] | None], list[RankSeries]] = {}
        self._span: tuple[tuple[float, float] | None] | None = None

    def poll(self, only: Collection[int] | None = None) -> bool:
        """Read what was appended; True if any point arrived. ``only``: these ranks alone, from every source (a
        side panel of one rank in a run of thousands need not read them all: the printed lines of 4,096 logs
        each second held the TUI's GIL)."""
        new = False
        files = layout.rank_file_names(self.run_dir, ("beat", "log"))  # paths as text: a Path each of 8,192 costs
        others = set() if only is None else set(files["log"]) - set(only)  # no source reads them
        for rank, path in self._metrics_files(only):
            new |= self._read(METRICS, rank, path)
        for rank, (_host, name) in sorted(files["beat"].items()):
            if only is None or rank in only:
                new |= self._read(BEATS, rank, Path(name))
        for source in self._others:
            won = {rank for origin, rank in self._tracks if origin != BEATS and _before(origin, source.name)}
            for rank, (points, replace) in source.poll(won | others).items():
                self._add(source.name, rank, points, replace)
                new = True
        if new:
            self.version += 1
            self._lists, self._span = {}, None
        return new

    def poll_all(self, max_polls: int = 1000) -> None:
        """Read everything there is now (a headless reader: poll until a poll brings nothing)."""
        for _ in range(max_polls):
            if not self.poll():
                return

    def _metrics_files(self, only: Collection[int] | None = None) -> list[tuple[int, Path]]:
        """(rank, path) of metrics/rank-R.jsonl, of ``only``'s ranks when given (a Path for each of 4,096 files
        a second cost the TUI more than reading the few it shows)."""
        folder = self.run_dir / layout.METRICS
        try:
            names = os.listdir(folder)
        except OSError:  # none yet, or not a directory
            return []
        found = [(int(m.group(1)), name) for name in names if (m := _METRICS_NAME.match(name))]
        return sorted((rank, folder / name) for rank, name in found if only is None or rank in only)

    def _read(self, source: str, rank: int, path: Path) -> bool:
        key = (source, rank)
        file = self._files.get(key)
        if file is None or file.path != path:
            file = self._files[key] = _File(path)
        track = self._tracks.get(key)
        added = False
        for raw in file.read():
            point = _metrics_point(raw) if source == METRICS else _beat_point(raw)
            if point is None:
                continue
            if track is None:
                track = self._tracks[key] = Track(rank, source, self.keep)
            track.add(*point)
            added = True
        return added

    def _add(self, origin: str, rank: int, points: list[sources.Point], replace: bool) -> None:
        track = self._tracks.get((origin, rank))
        if track is None or replace:
            track = self._tracks[(origin, rank)] = Track(rank, METRICS, self.keep)
        for point in points:
            track.add(*point)

    def origins(self) -> dict[int, str]:
        """rank -> where its metric points come from (one of cockpit.plot.sources.ORDER): the first source in
        that order with points for the rank."""
        out: dict[int, str] = {}
        for origin, rank in sorted(self._tracks, key=lambda k: _order(k[0])):
            if origin != BEATS:
                out.setdefault(rank, origin)
        return out

    def skipped(self) -> list[tuple[Path, str]]:
        """The files not read at the last poll, and why (a FIFO, a device, a symlink where a record file was;
        TensorBoard event files without the package that reads them)."""
        own = [(f.path, f.error) for f in self._files.values() if f.error is not None]
        return own + self._tensorboard.skipped()

    def source(self) -> str | None:
        """Where the points come from: METRICS when any rank wrote metrics, else BEATS, else None."""
        origins = {src for src, _ in self._tracks}
        return METRICS if origins - {BEATS} else (BEATS if origins else None)

    def series(self, ranks: Collection[int] | None = None) -> list[RankSeries]:
        """Every rank's series (only ``ranks``'s when given), by rank, from the run's metrics (its beats when it
        wrote none)."""
        return self._of(self.source(), ranks)

    def beats(self, ranks: Collection[int] | None = None) -> list[RankSeries]:
        """Every rank's beats (the wait-share chart's data), by rank."""
        return self._of(BEATS, ranks)

    def _of(self, source: str | None, ranks: Collection[int] | None) -> list[RankSeries]:
        key = (source, None if ranks is None else frozenset(ranks))
        found = self._lists.get(key)
        if found is None:
            chosen = self._chosen(source)
            found = self._lists[key] = [chosen[rank].series() for rank in sorted(chosen)
                                        if ranks is None or rank in ranks]
        return list(found)  # a copy: the caller may change its list, never ours

    def _chosen(self, source: str | None) -> dict[int, Track]:
        """rank -> its track of ``source``'s kind (METRICS: the winning origin's)."""
        if source == BEATS:
            return {rank: t for (origin, rank), t in self._tracks.items() if origin == BEATS}
        return {rank: self._tracks[(origin, rank)] for rank, origin in self.origins().items()}

    def span(self) -> tuple[float, float] | None:
        """The first and last time of any point, metrics and beats together: one time axis for the run's
        charts (the hook beats from interpreter start, the metrics from the first step)."""
        if self._span is None:
            kept = [*self._chosen(METRICS).values(), *self._chosen(BEATS).values()]
            times = [t for track in kept for t in track.times()]
            self._span = ((min(times), max(times)) if times else None,)
        return self._span[0]

    def ended(self) -> dict[int, float | None]:
        """rank -> when its process exited (its exit record in logs/; None while the record is being written):
        after that it is done, not stalled; between its last point and then it made no progress."""
        from cockpit.run.store import rank_exits

        files = layout.rank_files(self.run_dir, "exit")
        times = {rank: e.time for rank, e in rank_exits(self.run_dir, files).items()}
        return {rank: times.get(rank) for rank in files}

    def ranks(self) -> list[int]:
        """The ranks with points, from the run's one source (cheap: no series is built)."""
        return sorted(self._chosen(self.source()))


def run_clock(status: RunStatus | None, now: float,
              exits: Mapping[int, float | None] | None = None) -> tuple[float | None, float | None]:
    """(until, quiet) for a run's charts (cockpit.plot.chart.build): where their time axis ends (while the run
    runs: ``now``; once it is final: its ranks' last exit (``exits``, RunSeries.ended), else the run's end)
    and its stall threshold in seconds (status.json's ``watch``, else the job's ``stall_after``; None:
    adaptive)."""
    if status is None:
        return None, None
    said = status.watch.get("threshold_s") if isinstance(status.watch, dict) else None
    quiet = said if isinstance(said, (int, float)) and not isinstance(said, bool) and said > 0 else None
    quiet = quiet or status.stall_after or None
    if not status.final:
        return now, quiet
    ended = [t for t in (exits or {}).values() if t is not None]
    return (max(ended) if ended else status.ended), quiet


def _order(origin: str) -> int:
    return sources.ORDER.index(origin) if origin in sources.ORDER else len(sources.ORDER)


def _before(origin: str, other: str) -> bool:
    """Whether ``origin``'s points win over ``other``'s for the same rank."""
    return _order(origin) < _order(other)


def _metrics_point(raw: bytes) -> tuple[int, float, float | None] | None:
    try:
        rec = safeio.loads(raw)
        if not isinstance(rec, dict):  # (indexing one raised TypeError: the same None)
            return None
        step, time = rec["step"], float(rec["time"])
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(step, int) or isinstance(step, bool) or step < 0 or not 0 < time < 1e11:
        return None  # a record no writer makes (a negative step, time 0) would stretch the axes to nothing
    loss = rec.get("loss")
    if isinstance(loss, (int, float)) and not isinstance(loss, bool):  # NaN and inf kept: a chart says so
        return step, time, float(loss)
    return step, time, None


def _beat_point(raw: bytes) -> tuple[int, float, float] | None:
    """(collectives called, time, seconds waited inside collectives so far, the one it is inside now included:
    a rank blocked in a collective waits all the time)."""
    try:
        rec = safeio.loads(raw)
        if not isinstance(rec, dict):  # (indexing one raised TypeError: the same None)
            return None
        count, time, sync = rec["n"], float(rec["t"]), float(rec.get("sync") or 0.0)
        inside = time - float(rec["since"]) if rec.get("in") and rec.get("since") else 0.0
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(count, int) or isinstance(count, bool) or count < 0 or not 0 < time < 1e11:
        return None
    return count, time, sync + max(0.0, inside)
