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
from dataclasses import dataclass

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

    def rate(self, at_most: int | None = None) -> tuple[tuple[float, float], ...]:
        """(time, count per second over the interval that ends there), in time order; an interval whose count
        went back (a resume) says nothing and is left out. ``at_most``: that many intervals at most, each
        spanning several points (the exact mean rate over it, not the jitter of a 10 ms interval)."""
        pts = sorted(zip(self.times, self.counts, strict=True))
        if at_most and len(pts) > at_most + 1:
            stride = -(-(len(pts) - 1) // at_most)
            pts = pts[::stride] + ([pts[-1]] if (len(pts) - 1) % stride else [])
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


class Track:
    """One rank's points as they arrive, at most ``2 * keep`` of them (see the module's docstring)."""

    def __init__(self, rank: int, source: str = METRICS, keep: int = 500):
        self.rank, self.source, self.keep = rank, source, max(2, keep)
        self._points: dict = {}  # metrics: step -> (time, loss); beats: time -> (count, None)

    def add(self, count: int, time: float, loss: float | None = None) -> None:
        if self.source == METRICS:
            self._points.pop(count, None)  # the last record of a step wins, and moves to the end
            self._points[count] = (time, loss)
        else:
            self._points[time] = (count, None)
        if len(self._points) > 2 * self.keep:
            keys = sorted(self._points)
            self._points = {k: self._points[k] for k in keys[::2] + keys[-1:]}

    def __len__(self) -> int:
        return len(self._points)

    def series(self) -> RankSeries:
        if self.source == METRICS:
            items = sorted((c, t, loss) for c, (t, loss) in self._points.items())
        else:
            items = sorted(((c, t, None) for t, (c, _) in self._points.items()), key=lambda x: x[1])
        return RankSeries(self.rank, tuple(i[0] for i in items), tuple(i[1] for i in items),
                          tuple(i[2] for i in items), self.source)


@dataclass(frozen=True)
class Heat:
    """A rank x time grid of rates: ``cells[row][column]`` is the row's rate in that time slice, 0.0 when it
    made no progress while others did, None where it has no data (before its first point, at the very
    end). ``median``: of the cells above 0, the level the shades are relative to."""

    labels: tuple[str, ...]
    cells: tuple[tuple[float | None, ...], ...]
    t0: float
    t1: float
    median: float | None
    unit: str


def heat(series: list[RankSeries], columns: int, rows: int) -> Heat:
    """The grid for ``series`` over their common time span in ``columns`` slices. More ranks than ``rows``:
    consecutive ranks share a row, which shows the slowest of them (a straggler must not be averaged away)."""
    rated = [(s, s.rate(columns)) for s in series]
    times = [t for _, r in rated for t, _ in r]
    unit = UNITS[series[0].source] if series else UNITS[METRICS]
    if not times or columns < 1 or rows < 1:
        return Heat((), (), 0.0, 0.0, None, unit)
    t0 = min(t for s, _ in rated for t in s.times)
    t1 = max(times)
    width = max(t1 - t0, 1e-9) / columns
    per_rank = [(s.rank, _cells(r, t0, width, columns, t1)) for s, r in rated]
    group = -(-len(per_rank) // rows)
    labels, cells = [], []
    for i in range(0, len(per_rank), group):
        chunk = per_rank[i:i + group]
        first, last = chunk[0][0], chunk[-1][0]
        labels.append(str(first) if first == last else f"{first}-{last}")
        cells.append(tuple(_slowest([c[col] for _, c in chunk]) for col in range(columns)))
    positive = [v for row in cells for v in row if v]
    return Heat(tuple(labels), tuple(cells), t0, t1, statistics.median(positive) if positive else None, unit)


def _cells(rate: tuple[tuple[float, float], ...], t0: float, width: float, columns: int,
           t1: float) -> tuple[float | None, ...]:
    """A rate point (t, r) covers the interval since the point before it; each slice takes the mean of the
    points that cover its middle. After the rank's last point: 0.0 (no progress) once the others went on for
    more than two of its intervals; None until then (everyone ends within a beat of each other)."""
    out: list[float | None] = []
    if not rate:
        return tuple([None] * columns)
    starts = [rate[0][0] - _first_interval(rate)] + [t for t, _ in rate[:-1]]
    gaps = sorted(b - a for (a, _), (b, _) in zip(rate, rate[1:], strict=False))
    grace = 2 * (gaps[len(gaps) // 2] if gaps else width)
    last = rate[-1][0]
    j = 0
    for col in range(columns):
        mid = t0 + (col + 0.5) * width
        while j < len(rate) and rate[j][0] < mid:
            j += 1
        if j < len(rate):
            out.append(rate[j][1] if starts[j] <= mid else None)
        else:
            out.append(0.0 if t1 - last > grace and mid > last + grace / 2 else None)
    return tuple(out)


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
    slots: list[list[float]] = [[] for _ in range(buckets)]
    for pts in series:
        for x, y in pts:
            slots[min(buckets - 1, int((x - lo_x) / width))].append(y)
    rows = [(lo_x + (i + 0.5) * width, s) for i, s in enumerate(slots) if s]
    return (tuple(x for x, _ in rows), tuple(sum(s) / len(s) for _, s in rows), tuple(min(s) for _, s in rows),
            tuple(max(s) for _, s in rows))


def thin(points: tuple[tuple[float, float], ...], at_most: int) -> tuple[tuple[float, float], ...]:
    """At most ``at_most`` points for a chart that many cells wide (x-sorted input): the mean of each run of
    consecutive points, so a spike narrower than a cell still moves its cell."""
    if len(points) <= at_most or at_most < 1:
        return points
    size = len(points) / at_most
    out = []
    for i in range(at_most):
        chunk = points[int(i * size):int((i + 1) * size)] or points[int(i * size):int(i * size) + 1]
        out.append((sum(p[0] for p in chunk) / len(chunk), sum(p[1] for p in chunk) / len(chunk)))
    return tuple(out)
