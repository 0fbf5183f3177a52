"""A chart as a value: what to draw (lines with labels, axes, a note; or a heat map), decided from a run's
series before anything is drawn, so the terminal, the TUI and the PNG draw the same chart. Pure.

One line per rank while there are at most ``MAX_LINES`` ranks; beyond that the mean with the min and the max
(a band), because eight overlaid lines are already the most a reader can tell apart; beyond FOLD_FROM ranks
(cockpit.plot.fold) the median with the p10-p90 band and the outlier ranks' own lines, and the heat maps a row
per node when the ranks' hosts are known.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from cockpit.plot.fold import FOLD_FROM, by_node, fold_lines
from cockpit.plot.series import UNITS, WAIT, Ended, Heat, RankSeries, band, heat, lived, stalled, straggler

MAX_LINES = 8
METRICS = ("loss", "rate", "heat", "wait")
MEAN, LOW, HIGH = "mean", "min", "max"
TIME_UNITS = (("hours", 3600), ("minutes", 60), ("seconds", 1))  # the largest that gives the axis 3 or more


@dataclass(frozen=True)
class Line:
    label: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    role: str = "rank"  # "rank" | "trial" | MEAN | LOW | HIGH (the band's edges are drawn faint)


@dataclass(frozen=True)
class LineChart:
    title: str
    xlabel: str
    ylabel: str
    lines: tuple[Line, ...]
    note: str = ""  # said under the chart: why it is empty, a rank whose loss went NaN
    x_is_time: bool = False  # x is seconds since the run's first point
    log_y: bool = False  # a log y axis (a diverged trial would flatten the others on a linear one)
    x_end: float | None = None  # where the x axis ends when the data ends before (the run's end, or now)


@dataclass(frozen=True)
class HeatChart:
    title: str
    heat: Heat
    note: str = ""
    flagged: tuple[str, ...] = ()  # row labels to point at: the rank the others wait for


Chart = LineChart | HeatChart


HEAT_LABELS = 9  # the heat map's row labels ("120-127 ") take this many columns at most


def build(metric: str, series: Sequence[RankSeries], title: str, width: int, height: int,
          beats: Sequence[RankSeries] = (), ended: Ended = (), log_y: bool = False,
          span: tuple[float, float] | None = None, until: float | None = None,
          quiet: float | None = None, hosts: Mapping[int, str] | None = None) -> Chart:
    """The chart of ``metric`` (one of METRICS) for a ``width`` x ``height`` cell area; ``beats``: the rank
    hook's series, which the wait chart reads; ``ended``: the ranks whose process exited, and when
    (cockpit.plot.series.Ended); ``log_y``: the line charts' y axis on a log scale; ``span``: the run's time
    span (cockpit.plot.source.RunSeries.span), so that the rate, heat and wait charts share one time axis;
    ``until``: the run's end, or now while it runs, where their time axis ends (a stall of every rank is
    time without points); ``quiet``: the run's stall threshold in seconds (cockpit.plot.series.stalled);
    ``hosts``: rank -> host, the heat maps' rows by node beyond FOLD_FROM ranks."""
    columns, rows = max(1, width - HEAT_LABELS), max(1, height - 5)
    if until is not None:
        span = (min(span[0], until) if span else until, max(span[1], until) if span else until)
    if metric == "wait":
        return wait_chart(beats, f"{title}: share of time waiting in collectives", columns, rows, span, hosts)
    if metric == "loss":
        return replace(loss_chart(series, f"{title}: loss per rank", width), log_y=log_y)
    if metric == "rate":
        chart = rate_chart(series, f"{title}: {_unit(series)} per rank", width, span, ended, quiet)
        return replace(chart, log_y=log_y)
    per = "node (its slowest rank)" if hosts and len(series) > FOLD_FROM else "rank"
    return heat_chart(series, f"{title}: {_unit(series)} per {per} over time", columns, rows, ended, span, quiet,
                      hosts)


def _unit(series: Sequence[RankSeries]) -> str:
    return UNITS[series[0].source] if series else UNITS["metrics"]


def pick(series: Sequence[RankSeries], ranks: Sequence[int] | None) -> list[RankSeries]:
    """The series of ``ranks`` (all when None), in rank order."""
    wanted = None if ranks is None else set(ranks)
    return [s for s in series if wanted is None or s.rank in wanted]


def loss_chart(series: Sequence[RankSeries], title: str, width: int = 80) -> LineChart:
    """Loss over steps: a line per rank, or the mean with a min-max band for many ranks."""
    points = [(s.rank, s.losses()) for s in series]
    points = [(r, p) for r, p in points if p]
    bad = [f"rank {s.rank}: loss not finite from step {step}" for s in series
           if (step := s.first_nonfinite()) is not None]
    if not points:
        why = "no loss recorded yet" if series else _NO_POINTS
        return LineChart(title, "step", "loss", (), note="; ".join(bad) or why)
    lines = lines_for([(f"rank {r}", tuple((float(x), y) for x, y in p)) for r, p in points], width)
    return LineChart(title, "step", "loss", lines, note="; ".join(bad[:3]))


def rate_chart(series: Sequence[RankSeries], title: str, width: int = 80,
               span: tuple[float, float] | None = None, ended: Ended = (),
               quiet: float | None = None) -> LineChart:
    """Rate over time (seconds since the first point, or since ``span``'s start, to ``span``'s end): steps/s
    from metrics, collectives/s from beats. A rank that stalled (cockpit.plot.series.stalled: no progress while
    it lived) drops to 0 for as long as it did."""
    unit = UNITS[series[0].source] if series else UNITS["metrics"]
    rated = [(s.rank, s.rate(max(2, width // 2))) for s in series]
    rated = [(r, p) for r, p in rated if p]
    if not rated:
        why = "fewer than two points per rank yet" if series else _NO_POINTS
        return LineChart(title, "seconds", unit, (), note=why, x_is_time=True)
    t0 = min(s.times[0] for s in series if s.times)
    t0 = min(t0, span[0]) if span else t0
    others = max(t for _, p in rated for t, _ in p)
    end = max(others, span[1]) if span else others
    rated = [(r, p + _stall_points(p, lived(r, ended, end), others, quiet)) for r, p in rated]
    end = max([end, *(p[-1][0] for _, p in rated)])
    label, scale = next((name, sec) for name, sec in TIME_UNITS if end - t0 >= 3 * sec or sec == 1)
    lines = lines_for([(f"rank {r}", tuple(((t - t0) / scale, v) for t, v in p)) for r, p in rated], width)
    stuck = [r for r, p in rated if p[-1][1] == 0.0 and len(p) > 1 and p[-2][1] == 0.0]
    note = f"no progress at the end: {_ranks(stuck)}" if stuck else ""
    return LineChart(title, label, unit, lines, note=note, x_is_time=True, x_end=(end - t0) / scale)


def _stall_points(rate: tuple[tuple[float, float], ...], alive: float | None, others: float,
                  quiet: float | None) -> tuple[tuple[float, float], ...]:
    """A stalled rank's rate of 0 from one interval after its last progress to the end of its stall."""
    window = stalled(rate, alive, others, quiet)
    return () if window is None else ((window[0], 0.0), (window[1], 0.0))


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks[:8])) + (
        " ..." if len(ranks) > 8 else "")


def heat_chart(series: Sequence[RankSeries], title: str, columns: int, rows: int,
               ended: Ended = (), span: tuple[float, float] | None = None,
               quiet: float | None = None, hosts: Mapping[int, str] | None = None) -> HeatChart:
    """The rank x time grid of rates (cockpit.plot.series.heat) for ``columns`` x ``rows`` cells; ``ended``:
    the ranks whose process exited, and when; ``hosts``: a row per node beyond FOLD_FROM ranks."""
    fold = bool(hosts) and len(series) > FOLD_FROM
    grid = heat(list(series), columns, len(series) if fold else rows, ended=ended, span=span, quiet=quiet)
    if fold and hosts:
        grid = by_node(grid, hosts, rows)[0]
    return HeatChart(title, grid, note="" if grid.labels else _NO_POINTS)


def wait_chart(beats: Sequence[RankSeries], title: str, columns: int, rows: int,
               span: tuple[float, float] | None = None, hosts: Mapping[int, str] | None = None) -> HeatChart:
    """The rank x time grid of the share of time each rank waited in collectives, and the straggler named
    when one rank hardly waits while the others wait for it; ``hosts``: a row per node beyond FOLD_FROM ranks."""
    fold = bool(hosts) and len(beats) > FOLD_FROM
    grid = heat(list(beats), columns, len(beats) if fold else rows, kind=WAIT, span=span)
    members: dict[str, tuple[int, ...]] | None = None
    if fold and hosts:
        grid, members = by_node(grid, hosts, rows)
    if not grid.labels:
        return HeatChart(title, grid, note="no beats: the rank hook (logs/rank-R.HOST.beat) wrote none yet")
    if len(beats) == 1:
        return HeatChart(title, grid, note="one rank: compare it with the others (all ranks) to see who waits")
    found = straggler(list(beats))
    if found is None:
        return HeatChart(title, grid, note="no rank stands out")
    note = (f"rank {found[0]} waits {found[1]:.0%} of its time, the others {found[2]:.0%}: they wait for "
            f"rank {found[0]}")
    rank = found[0]
    held = [lb for lb in grid.labels if (rank in members[lb] if members is not None else _holds(lb, rank))]
    return HeatChart(title, grid, note=note, flagged=tuple(held))


def _holds(label: str, rank: int) -> bool:
    """Whether the heat map's row ``label`` ("5" or "4-7") is or holds ``rank``."""
    first, _, last = label.partition("-")
    return int(first) <= rank <= int(last or first)


def trials_chart(trials: Sequence[tuple[str, RankSeries | None]], title: str, width: int = 80) -> LineChart:
    """A sweep's trials on one chart: each trial's rank-0 loss over steps, labelled with its arguments. A trial
    that diverged (cockpit.plot.chart.diverged) says so in its label and in the note, and is drawn last: on top
    of the others, the one a reader looks for first."""
    kept, bad = [], []
    for label, s in trials:
        if s is None:
            continue
        pts, why = s.losses(), diverged(s)
        if why is not None:
            bad.append(f"{label}: {why}")
        if pts:
            named = f"{label} (diverged)" if why is not None else label
            kept.append((why is not None, Line(named, tuple(float(x) for x, _ in pts), tuple(y for _, y in pts),
                                               "trial")))
    lines = tuple(line for _, line in sorted(kept, key=lambda k: k[0]))  # stable: the diverged last
    note = "; ".join(bad[:3]) if bad else ("" if lines else "no trial has recorded a loss yet")
    return LineChart(title, "step", "loss", lines, note=note)


DIVERGED = 2.0  # a loss that rose past this many times its first value diverged


def diverged(series: RankSeries) -> str | None:
    """How a run's loss diverged, or None: not finite from some step, or above DIVERGED x its first at its last
    point and since some step. A spike the run came back from is not a divergence: that trial may end best."""
    step = series.first_nonfinite()
    if step is not None:
        return f"loss not finite from step {step}"
    pts = series.losses()
    first = pts[0][1] if pts else 0.0
    if first <= 0 or not pts or pts[-1][1] <= DIVERGED * first:
        return None
    since = len(pts) - 1
    while since > 0 and pts[since - 1][1] > DIVERGED * first:
        since -= 1
    return f"loss above {DIVERGED:g}x its first from step {pts[since][0]:g}"


def lines_for(named: list[tuple[str, tuple[tuple[float, float], ...]]], width: int) -> tuple[Line, ...]:
    """A line per (label, points) while there are at most MAX_LINES; beyond that the mean with the min and
    the max over them all (``width``: the chart's columns, the band's buckets)."""
    if len(named) <= MAX_LINES:
        return tuple(Line(label, tuple(x for x, _ in p), tuple(y for _, y in p)) for label, p in named)
    if len(named) > FOLD_FROM:
        return folded_lines(named, width)
    xs, mean, lo, hi = band([p for _, p in named], max(10, width))
    return (Line(f"max of {len(named)}", xs, hi, HIGH), Line(f"mean of {len(named)}", xs, mean, MEAN),
            Line("min", xs, lo, LOW))


def folded_lines(named: list[tuple[str, tuple[tuple[float, float], ...]]], width: int) -> tuple[Line, ...]:
    """Many ranks' lines folded (cockpit.plot.fold): the p10-p90 band, the median, and the outlier ranks'
    own lines, the farthest first."""
    (xs, p10, p50, p90), outliers = fold_lines(named, max(10, width))
    lines = [Line(f"p90 of {len(named)}", xs, p90, HIGH), Line(f"p50 of {len(named)}", xs, p50, MEAN),
             Line("p10", xs, p10, LOW)]
    for k in outliers:
        label, p = named[k]
        lines.append(Line(f"{label} (outlier)", tuple(x for x, _ in p), tuple(y for _, y in p)))
    return tuple(lines)


_NO_POINTS = ("no metrics: cockpit.train writes metrics/rank-R.jsonl; a script may append "
              '{"step": N, "time": T, "loss": L} lines there itself, or print "step N loss=L" lines; '
              "trainer_state.json, Lightning's metrics.csv and TensorBoard event files are read too")


def relabel(chart: Chart, old: str, new: str) -> Chart:
    """The same chart with ``old`` said as ``new`` in its title and labels (a sweep's trials where a run's
    ranks would be)."""
    title = chart.title.replace(f"per {old}", f"per {new}")
    if isinstance(chart, HeatChart):
        return replace(chart, title=title, heat=replace(chart.heat, who=new))
    lines = tuple(replace(line, label=line.label.replace(old, new)) for line in chart.lines)
    return replace(chart, title=title, lines=lines)
