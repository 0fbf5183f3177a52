"""The numbers behind a run's charts, kept bounded. Pure: records in, tuples out; no IO, no clock.

A rank's points come from one of two places. ``metrics``: cockpit.train's records (``{"step", "time",
"loss"}``, any script may write them); the count is the optimizer step, and a resumed run's repeated steps
keep their last record. ``beats``: the rank hook's once-a-second line (``{"t", "n"}``) for a script that
writes no metrics; the count is the collectives it called, so its rate is collectives/s, still the pulse
that stops when a rank stalls.

Bounded the way a long run needs: past ``2 * keep`` points a track drops every other one, so the whole run
stays on the chart at half the resolution, and memory never grows with the run's length.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

METRICS, BEATS = "metrics", "beats"
UNITS = {METRICS: "steps/s", BEATS: "collectives/s"}


@dataclass(frozen=True)
class RankSeries:
    """One rank's points in count order: ``counts`` (step, or collectives called), ``times`` (Unix time),
    ``loss`` (None where the record had none)."""

    rank: int
    counts: tuple[int, ...]
    times: tuple[float, ...]
    loss: tuple[float | None, ...]
    source: str = METRICS
    waited: tuple[float, ...] = ()  # beats: seconds spent inside collectives so far, at each point

    def wait(self, at_most: int | None = None) -> tuple[tuple[float, float], ...]:
        """(time, share of the interval spent waiting inside collectives), from beats: in synchronous data
        parallelism every rank's step rate is the slowest one's, so this is where a straggler shows (it hardly
        waits; the others wait for it), and a hang's culprit (the one rank not inside the collective)."""
        if not self.waited:
            return ()
        pts = _strided(sorted(zip(self.times, self.waited, strict=True)), at_most)
        return tuple((t1, min(1.0, max(0.0, (w1 - w0) / (t1 - t0))))
                     for (t0, w0), (t1, w1) in zip(pts, pts[1:], strict=False) if t1 > t0)

    def rate(self, at_most: int | None = None) -> tuple[tuple[float, float], ...]:
        """(time, count per second over the interval that ends there), in time order; an interval whose count
        went back (a resume) says nothing and is left out. ``at_most``: that many intervals at most, each
        spanning several points (the exact mean rate over it, not the jitter of a 10 ms interval)."""
        pts = _strided(sorted(zip(self.times, self.counts, strict=True)), at_most)
        out = []
        for (t0, c0), (t1, c1) in zip(pts, pts[1:], strict=False):
            if t1 > t0 and c1 >= c0:
                out.append((t1, (c1 - c0) / (t1 - t0)))
        return tuple(out)

    def losses(self) -> tuple[tuple[int, float], ...]:
        """(step, loss) where a finite loss was recorded."""
        return tuple((c, v) for c, v in zip(self.counts, self.loss, strict=True) if v is not None and math.isfinite(v))

    def first_nonfinite(self) -> int | None:
        """The first step whose loss was NaN or infinite (a diverged run), if any."""
        bad = (c for c, v in zip(self.counts, self.loss, strict=True) if v is not None and not math.isfinite(v))
        return next(bad, None)


def _strided(pts: list[T], at_most: int | None) -> list[T]:
    """Every k-th point (and the last) so that at most ``at_most`` intervals remain."""
    if at_most and len(pts) > at_most + 1:
        stride = -(-(len(pts) - 1) // at_most)
        return pts[::stride] + ([pts[-1]] if (len(pts) - 1) % stride else [])
    return pts


class Track:
    """One rank's points as they arrive, at most ``2 * keep`` of them (see the module's docstring).

    Its series is built once per change: ``series()`` returns the same RankSeries object until a point
    arrives, so a chart drawn again from unchanged data sorts and copies nothing."""

    def __init__(self, rank: int, source: str = METRICS, keep: int = 500):
        self.rank, self.source, self.keep = rank, source, max(2, keep)
        # metrics: step (int) -> (time, loss); beats: time -> (count (int), seconds waited)
        self._points: dict[Any, tuple[Any, float | None]] = {}
        self._series: RankSeries | None = None  # built from _points; None once a point arrived since
        self._span: tuple[float, float] | None = None  # the first and the last time, kept as points arrive

    def add(self, count: int, time: float, value: float | None = None) -> None:
        """A point: ``value`` is the loss (metrics) or the seconds waited in collectives so far (beats)."""
        key = count if self.source == METRICS else time
        # metrics: the last record of a step wins, and moves to the end
        replaced = self._points.pop(key, None) is not None
        self._points[key] = (time, value) if self.source == METRICS else (count, value)
        self._series = None
        span = self._span
        if replaced or (span is None and len(self._points) > 1):
            self._span = None  # the replaced point may have been an end: found again when asked
        else:
            self._span = (time, time) if span is None else (min(span[0], time), max(span[1], time))
        if len(self._points) > 2 * self.keep:
            keys = sorted(self._points)
            self._points = {k: self._points[k] for k in keys[::2] + keys[-1:]}
            self._span = None  # the thinning may have dropped an end (a step replaced earlier in time)

    def __len__(self) -> int:
        return len(self._points)

    def times(self) -> tuple[float, float] | tuple[()]:
        """The first and the last time of this track's points (cheap: kept as they arrive)."""
        if not self._points:
            return ()
        if self._span is None:
            times = list(self._points) if self.source == BEATS else [t for t, _ in self._points.values()]
            self._span = (min(times), max(times))
        return self._span

    def series(self) -> RankSeries:
        """The points in count order; the same object until a point arrives."""
        if self._series is None:
            self._series = self._build()
        return self._series

    def _build(self) -> RankSeries:
        if self.source == METRICS:
            items = sorted((c, t, loss) for c, (t, loss) in self._points.items())
            return RankSeries(self.rank, tuple(i[0] for i in items), tuple(i[1] for i in items),
                              tuple(i[2] for i in items), self.source)
        items = sorted((t, c, w) for t, (c, w) in self._points.items())
        return RankSeries(self.rank, tuple(i[1] for i in items), tuple(i[0] for i in items),
                          tuple(None for _ in items), self.source, tuple(i[2] or 0.0 for i in items))


@dataclass(frozen=True)
class Heat:
    """A rank x time grid: ``cells[row][column]`` is the row's value in that time slice; None where it has no
    data (before its first point, at the very end). ``kind`` RATE: a rate, 0.0 when the rank made no progress
    while others did, shaded relative to ``median`` (of the cells above 0). ``kind`` WAIT: the share of time
    spent waiting in collectives, 0..1, shaded as it is."""

    labels: tuple[str, ...]
    cells: tuple[tuple[float | None, ...], ...]
    t0: float
    t1: float
    median: float | None
    unit: str
    kind: str = "rate"
    who: str = "rank"  # what a row is: a rank, or a sweep's trial


RATE, WAIT = "rate", "wait"


Ended = Mapping[int, float | None] | Collection[int]
"""The ranks whose process exited: rank -> when (its exit record's time), or a bare collection of ranks (a sweep's
finished trials: ended at their last point)."""

STALL_FLOOR, STALL_MULTIPLE = 60.0, 3.0  # the watchdog's adaptive threshold (cockpit.hang.progress)


def heat(series: list[RankSeries], columns: int, rows: int, kind: str = RATE,
         ended: Ended = (), span: tuple[float, float] | None = None, quiet: float | None = None) -> Heat:
    """The grid for ``series`` over their common time span in ``columns`` slices: their rate, or (``kind``
    WAIT) their wait share. More ranks than ``rows``: consecutive ranks share a row, which shows the lowest of
    them (the slowest rate, the least waiting: a straggler must not be averaged away). After a rank's last
    progress it shows no progress (0.0) while it lived on without any (``stalled``: the others went on, or it
    lived ``quiet`` seconds more, the run's stall threshold), until its exit (``ended``) or the span's end (the
    run's end, or now: a hang of every rank shows as it lasts); a rank that exited at its last point, or a
    finished trial, has no data after it, nor has a rank before its first progress (starting up). ``span``:
    the time axis to lay the grid on (the run's, so that its rate map and its wait map line up), widened to
    hold every point and every exit."""
    if kind == WAIT:
        valued = [(s, s.wait(columns)) for s in series]
        unit = "share of time waiting in collectives"
    else:
        valued = [(s, _started(s.rate(columns))) for s in series]
        unit = UNITS[series[0].source] if series else UNITS[METRICS]
    times = [t for _, r in valued for t, _ in r]
    if not times or columns < 1 or rows < 1:
        return Heat((), (), 0.0, 0.0, None, unit, kind)
    t0 = min(t for s, _ in valued for t in s.times)
    t1 = last = max(times)  # last: the others' last point, what a stall is judged against
    exits = [t for t in ended.values() if t is not None] if isinstance(ended, Mapping) else []
    if span is not None:
        t0, t1 = min(t0, span[0]), max(t1, span[1])
    t1 = max([t1, *exits])
    width = max(t1 - t0, 1e-9) / columns
    per_rank = [(s.rank, _cells(r, t0, width, columns,
                                stalled(r, lived(s.rank, ended, t1), last, quiet) if kind == RATE else None))
                for s, r in valued]
    group = -(-len(per_rank) // rows)
    labels, cells = [], []
    for i in range(0, len(per_rank), group):
        chunk = per_rank[i:i + group]
        first, end = chunk[0][0], chunk[-1][0]
        labels.append(str(first) if first == end else f"{first}-{end}")
        cells.append(tuple(_slowest([c[col] for _, c in chunk]) for col in range(columns)))
    positive = [v for row in cells for v in row if v]
    return Heat(tuple(labels), tuple(cells), t0, t1, statistics.median(positive) if positive else None, unit, kind)


def lived(rank: int, ended: Ended, end: float) -> float | None:
    """Until when ``rank``'s process lived: its exit time; None when it ended at its last point (an exit with
    no time, a finished trial); ``end`` (the run's end, or now) when it has not exited."""
    if isinstance(ended, Mapping):
        return ended.get(rank, end)
    return None if rank in ended else end


def stalled(rate: tuple[tuple[float, float], ...], alive: float | None, others: float,
            quiet: float | None = None) -> tuple[float, float] | None:
    """(from, to): the time after a rank's last progress in which it made none while it lived (``alive``: until
    when, cockpit.plot.series.lived), when that is a stall: the others went on (``others``: their last point)
    for more than two of its intervals, or it lived ``quiet`` seconds more (the run's stall threshold; None:
    the watchdog's adaptive one, max(60 s, 3 x its longest interval)). None otherwise: it ended with the
    others, within a beat of each other. The rate over that time is 0."""
    if not rate or alive is None:
        return None
    gaps = sorted(b - a for (a, _), (b, _) in zip(rate, rate[1:], strict=False))
    gap = gaps[len(gaps) // 2] if gaps else 1.0
    last = rate[-1][0]
    limit = quiet if quiet else max(STALL_FLOOR, STALL_MULTIPLE * (gaps[-1] if gaps else gap))
    if alive - last <= 2 * gap or not (others - last > 2 * gap or alive - last > limit):
        return None
    return last + gap, alive


def _cells(rate: tuple[tuple[float, float], ...], t0: float, width: float, columns: int,
           stall: tuple[float, float] | None) -> tuple[float | None, ...]:
    """A point (t, v) covers the interval since the point before it; each slice takes the value of the point
    whose interval holds its middle. After the rank's last point: 0.0 (no progress) inside ``stall``
    (cockpit.plot.series.stalled), None (no data) elsewhere."""
    out: list[float | None] = []
    if not rate:
        return tuple([None] * columns)
    starts = [rate[0][0] - _first_interval(rate)] + [t for t, _ in rate[:-1]]
    j = 0
    for col in range(columns):
        mid = t0 + (col + 0.5) * width
        while j < len(rate) and rate[j][0] < mid:
            j += 1
        if j < len(rate):
            out.append(rate[j][1] if starts[j] <= mid else None)
        else:
            out.append(0.0 if stall is not None and stall[0] < mid <= stall[1] else None)
    return tuple(out)


def _started(rate: tuple[tuple[float, float], ...]) -> tuple[tuple[float, float], ...]:
    """The rate from the rank's first progress on (before it, it was starting: no data, not a stall)."""
    first = next((i for i, (_, r) in enumerate(rate) if r > 0), len(rate))
    return rate[first:]


def _first_interval(rate: tuple[tuple[float, float], ...]) -> float:
    return rate[1][0] - rate[0][0] if len(rate) > 1 else 1.0


def _slowest(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def band(series: list[tuple[tuple[float, float], ...]], buckets: int) -> tuple[tuple[float, ...], ...]:
    """Mean, min and max over many ranks' (x, y) points, per x bucket: ``(xs, mean, lo, hi)``, buckets with no
    point left out. Used where one line per rank would be a tangle (more than a handful of ranks)."""
    xs = [x for pts in series for x, _ in pts]
    if not xs or buckets < 1:
        return ((), (), (), ())
    lo_x, hi_x = min(xs), max(xs)
    width = (hi_x - lo_x) / buckets or 1.0
    scale, top = 1.0 / width, buckets - 1
    slots: list[list[float]] = [[] for _ in range(buckets)]
    for pts in series:
        for x, y in pts:
            i = int((x - lo_x) * scale)
            slots[i if i < top else top].append(y)
    rows = [(lo_x + (i + 0.5) * width, s) for i, s in enumerate(slots) if s]
    return (tuple(x for x, _ in rows), tuple(sum(s) / len(s) for _, s in rows), tuple(min(s) for _, s in rows),
            tuple(max(s) for _, s in rows))


def thin(points: tuple[tuple[float, float], ...], cells: int) -> tuple[tuple[float, float], ...]:
    """At most ``2 * cells`` points for a chart ``cells`` columns wide (x-sorted input): per run of consecutive
    points its lowest and its highest, in x order, so a peak narrower than a cell is drawn at its height (a mean
    would flatten the first steps' loss)."""
    if len(points) <= 2 * cells or cells < 1:
        return points
    size = len(points) / cells
    out: list[tuple[float, float]] = []
    for i in range(cells):
        chunk = points[int(i * size):int((i + 1) * size)]
        if not chunk:
            continue
        low, high = min(chunk, key=lambda p: p[1]), max(chunk, key=lambda p: p[1])
        out.extend(sorted({low, high}))
    return tuple(out)


def mean_wait(series: RankSeries) -> float | None:
    """The share of its time a rank spent waiting in collectives, over all its beats."""
    if len(series.waited) < 2 or series.times[-1] <= series.times[0]:
        return None
    return min(1.0, max(0.0, (series.waited[-1] - series.waited[0]) / (series.times[-1] - series.times[0])))


def straggler(series: list[RankSeries], low: float = 0.5, busy: float = 0.2) -> tuple[int, float, float] | None:
    """(rank, its wait share, the others' median) when one rank waits less than ``low`` x what the others
    wait while they wait at least ``busy`` of their time: they wait for it. None otherwise."""
    shares = [(s.rank, w) for s in series if (w := mean_wait(s)) is not None]
    if len(shares) < 2:
        return None
    rank, least = min(shares, key=lambda rs: rs[1])
    others = statistics.median(w for r, w in shares if r != rank)
    return (rank, least, others) if others >= busy and least < low * others else None
