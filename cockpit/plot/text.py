"""A chart (cockpit.plot.chart) drawn as text: line charts through plotext (axes, ticks, a legend), the heat
map as rows of shaded cells. ``draw`` is the terminal's (`cockpit plot`); ``apply`` issues the same plotext
calls on any plotext figure, which is how the TUI's chart widget (textual-plotext) draws the same chart.

Without colour (a pipe, NO_COLOR) each line gets its own marker, so the lines stay apart in plain text.
"""

from __future__ import annotations

import math

from cockpit.plot.chart import HIGH, LOW, MEAN, Chart, HeatChart, LineChart
from cockpit.plot.series import WAIT, thin

COLORS = ("blue+", "orange+", "green+", "red+", "magenta+", "cyan+", "yellow", "white")
MARKERS = ("•", "x", "+", "o", "*", "#", "%", "=")
SHADES = "░▒▓█"  # rate relative to the median cell: <40%, <70%, <90%, from 90%
STALLED, NO_DATA = "·", " "
# blank: a rank with no record there, before its first step (starting: imports, the model, the rendezvous) or
# after it ended; a new user read the empty first third of a healthy run as a problem
HEAT_LEGEND = "█ ≥90%  ▓ ≥70%  ▒ ≥40%  ░ <40%  · no progress  blank: not started or ended"
WAIT_LEGEND = "waiting: █ ≥75% ▓ ≥50% ▒ ≥25% ░ <25%"


def apply(chart: LineChart, plt, width: int, color: bool = True, height: int | None = None) -> None:
    """Draw ``chart`` onto the plotext figure ``plt`` (the ``plotext`` module or a textual-plotext Plot),
    whose size and theme the caller sets afterwards; ``width`` bounds the points per line to what the columns
    can show; ``height`` (the figure's lines, when known) lets the y axis make room above the data for the
    legend (see legend_room). The figure starts over (clear_data would keep the last chart's ticks and
    labels)."""
    plt.clear_figure()
    plt.title(chart.title)
    plt.xlabel(chart.xlabel + (f"   ({chart.note})" if chart.note and chart.lines else ""))
    plt.ylabel(chart.ylabel + (" (log)" if chart.log_y else ""))
    if chart.log_y:
        plt.yscale("log")
    if chart.xlabel == "step" and chart.lines:
        lo, hi = min(min(line.xs) for line in chart.lines), max(max(line.xs) for line in chart.lines)
        plt.xticks(step_ticks(lo, hi, max(2, width // 16)))
    for i, line in enumerate(chart.lines):
        pts = thin(tuple(zip(line.xs, line.ys, strict=True)), max(2, width))
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        style: dict = {"label": line.label}
        if line.role in (LOW, HIGH):
            style.update(color="gray", marker="dot" if color else ".")
        elif color:
            style["color"] = COLORS[0] if line.role == MEAN else COLORS[i % len(COLORS)]
        else:
            style["marker"] = MARKERS[i % len(MARKERS)]
        plt.plot(xs, ys, **style)
    if chart.x_end is not None and chart.lines:
        plt.xlim(min(min(line.xs) for line in chart.lines), chart.x_end)  # the run's end, past its last point
    room = legend_room(chart, width, height) if height else None
    if room is not None:
        plt.ylim(*room)


def legend_room(chart: LineChart, width: int, height: int) -> tuple[float, float] | None:
    """The y axis's (lower, upper) limits (log10 of them on a log axis, as plotext takes them) that keep every
    point out from under the legend, which plotext draws over the data in the top-left corner, one line per
    label: the start of every loss curve, and a trial that diverged; None when nothing is under it, or when the
    legend would need most of the height (then the chart stays as it is)."""
    rows, columns = height - 5, width - 10  # plotext: title, frame, x ticks, x label; y ticks and frame
    if not chart.lines or rows < 4 or columns < 10:
        return None
    share = (max(len(line.label) for line in chart.lines) + 6) / columns  # "▞▞ label " after a space
    k = (len(chart.lines) + 0.5) / (rows - 1)
    pts = [(x, y) for line in chart.lines for x, y in zip(line.xs, line.ys, strict=True)]
    if chart.log_y:
        pts = [(x, math.log10(y)) for x, y in pts if y > 0]
    if not pts or k >= 0.6:
        return None
    lo_x = min(x for x, _ in pts)
    hi_x = max([chart.x_end or lo_x, *(x for x, _ in pts)])
    under = [y for x, y in pts if x <= lo_x + share * (hi_x - lo_x)]
    low, high = min(y for _, y in pts), max(y for _, y in pts)
    if not under or high <= low:
        return None
    top = (max(under) - k * low) / (1 - k)
    return (low, top) if top > high else None


def step_ticks(lo: float, hi: float, at_most: int) -> list[int]:
    """Whole, round step numbers (1, 2 or 5 x 10^k apart) from ``lo`` to ``hi``, at most ``at_most`` of them."""
    span = max(hi - lo, 1.0)
    for exp in range(0, 12):
        for base in (1, 2, 5):
            gap = base * 10**exp
            if span / gap <= at_most - 1:
                first = -(-int(lo) // gap) * gap
                return list(range(first, int(hi) + 1, gap)) or [int(lo)]
    return [int(lo), int(hi)]


def draw(chart: Chart, width: int, height: int, color: bool = False) -> str:
    """The chart as ``height`` lines of at most ``width`` columns (ANSI colours when ``color``)."""
    if isinstance(chart, HeatChart):
        return draw_heat(chart, width, color)
    if not chart.lines:
        return f"{chart.title}\n{chart.note}"
    import plotext as plt

    apply(chart, plt, width, color, height)
    plt.theme("clear")
    plt.limit_size(False, False)  # the size asked for, not the terminal's (a pipe, a report)
    plt.plotsize(width, height)
    text = plt.build().rstrip("\n")
    return text if color else plt.uncolorize(text)


def heat_rows(chart: HeatChart) -> list[tuple[str, list[tuple[str, int]]]]:
    """Per row: its label and per cell (character, level): level 0 no data, 1 no progress, 2..5 the shades
    from slowest to full speed."""
    h = chart.heat
    cell = _wait_cell if h.kind == WAIT else _cell
    return [(label, [cell(v, h.median) for v in cells]) for label, cells in zip(h.labels, h.cells, strict=True)]


def _wait_cell(value: float | None, _median: float | None) -> tuple[str, int]:
    if value is None:
        return NO_DATA, 0
    shade = 0 if value < 0.25 else 1 if value < 0.5 else 2 if value < 0.75 else 3
    return SHADES[shade], shade + 2


def _cell(value: float | None, median: float | None) -> tuple[str, int]:
    if value is None:
        return NO_DATA, 0
    if value <= 0 or not median:
        return STALLED, 1
    ratio = value / median
    shade = 0 if ratio < 0.4 else 1 if ratio < 0.7 else 2 if ratio < 0.9 else 3
    return SHADES[shade], shade + 2


_ANSI = {1: "\x1b[31m", 2: "\x1b[31m", 3: "\x1b[33m", 4: "\x1b[32m", 5: "\x1b[32m"}


def label_width(chart: HeatChart) -> int:
    return max((len(label) for label in chart.heat.labels), default=1) + 1


def row_label(chart: HeatChart, label: str) -> str:
    """A row's label, right-aligned in the label column; a flagged row (the rank the others wait for) ends in
    '▶' where the others end in a space."""
    return f"{label:>{label_width(chart) - 1}}" + ("▶" if label in chart.flagged else " ")


def heat_axis(chart: HeatChart) -> str:
    """The time axis under the rows: 0 s at the first column, the span at the last."""
    h = chart.heat
    cols = len(h.cells[0]) if h.cells else 0
    left, right = "0 s", f"{h.t1 - h.t0:.0f} s"
    return " " * label_width(chart) + left + right.rjust(max(1, cols - len(left)))


def heat_legend(chart: HeatChart) -> list[str]:
    """What the shades mean (wait shares as they are; rates against the median cell), one or two lines."""
    h = chart.heat
    if h.kind == WAIT:
        return [WAIT_LEGEND]
    scale = f"100% = the median, {h.median:.3g} {h.unit}" if h.median else f"no {h.unit} yet"
    return [HEAT_LEGEND, scale]


def draw_heat(chart: HeatChart, width: int, color: bool = False) -> str:
    """Title, one row per rank (or group of ranks), a time axis and the legend."""
    if not chart.heat.labels:
        return f"{chart.title}\n{chart.note}"
    out = [chart.title[:width]]
    for label, cells in heat_rows(chart):
        body = "".join(f"{_ANSI[lvl]}{ch}\x1b[0m" if color and lvl else ch for ch, lvl in cells)
        out.append(row_label(chart, label) + body)
    out.append(heat_axis(chart))
    out.extend(heat_legend(chart))
    if chart.note:
        out.append(chart.note)
    return "\n".join(out)
