"""A chart (cockpit.plot.chart) as a PNG file, through matplotlib's Agg canvas (no display, no pyplot global
state). matplotlib is the optional ``plot`` extra: without it, a PngError says how to install it.

The file is written beside its final name and renamed into place, so a failed write leaves what was there;
a file that is there and is not a PNG is never replaced (``--png job.yaml`` would otherwise eat the job).
"""

from __future__ import annotations

import os
from pathlib import Path

from cockpit.plot.chart import HIGH, LOW, Chart, HeatChart, LineChart
from cockpit.plot.series import WAIT

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SIZE_INCHES, DPI = (10.0, 5.0), 100


class PngError(Exception):
    """Why the PNG was not written: one line with a hint."""


def write_png(chart: Chart, path: str | Path) -> Path:
    """Draw ``chart`` into the PNG file ``path``; returns the path."""
    path = Path(path)
    _check_target(path)
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise PngError("a PNG needs matplotlib, which is not installed (hint: pip install 'cockpit[plot]', "
                       "or pip install matplotlib)") from None
    fig = Figure(figsize=SIZE_INCHES, dpi=DPI, layout="tight")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if isinstance(chart, HeatChart):
        _heat(fig, ax, chart)
    else:
        _lines(ax, chart)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fig.savefig(tmp, format="png")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise PngError(f"{path}: cannot write it: {exc.strerror or exc}") from None
    return path


def _check_target(path: Path) -> None:
    if path.is_dir():
        raise PngError(f"{path}: is a directory (hint: give a file name, e.g. {path / 'loss.png'})")
    if path.name == "-" or not path.name:
        raise PngError(f"{path}: a PNG goes to a file, not a stream (hint: give a file name, e.g. loss.png)")
    if path.exists() and path.stat().st_size > 0:  # an empty file holds nothing to lose
        try:
            with open(path, "rb") as f:
                head = f.read(len(PNG_MAGIC))
        except OSError as exc:
            raise PngError(f"{path}: cannot read it: {exc.strerror or exc}") from None
        if head != PNG_MAGIC:
            raise PngError(f"{path}: is there and is not a PNG; not replacing it (hint: pick another name)")


def _lines(ax, chart: LineChart) -> None:
    ax.set_title(chart.title)
    ax.set_xlabel(chart.xlabel)
    ax.set_ylabel(chart.ylabel)
    if chart.log_y:
        ax.set_yscale("log")
    edges = {line.role: line for line in chart.lines if line.role in (LOW, HIGH)}
    if LOW in edges and HIGH in edges:
        band = "min-max" if edges[LOW].label == "min" else "p10-p90"  # cockpit.plot.fold beyond 64 ranks
        ax.fill_between(edges[LOW].xs, edges[LOW].ys, edges[HIGH].ys, color="0.85", label=band)
    for line in chart.lines:
        if line.role not in (LOW, HIGH):
            ax.plot(line.xs, line.ys, label=line.label, linewidth=1.2)
    if chart.x_end is not None and chart.lines:
        ax.set_xlim(right=chart.x_end)  # the run's end, past its last point
    if chart.lines:
        ax.legend(loc="best", fontsize="small")
    ax.grid(True, alpha=0.3)
    if chart.note:
        ax.text(0.0, -0.18, chart.note, transform=ax.transAxes, fontsize="small", color="0.3")


def _heat(fig, ax, chart: HeatChart) -> None:
    h = chart.heat
    ax.set_title(chart.title)
    values = [[float("nan") if v is None else v for v in row] for row in h.cells]
    wait = h.kind == WAIT  # a share, 0..1 as it is; a rate, red to green up to just above the median
    image = ax.imshow(values, aspect="auto", interpolation="nearest", cmap="Blues" if wait else "RdYlGn",
                      extent=(0.0, max(h.t1 - h.t0, 1e-9), len(h.labels) - 0.5, -0.5),
                      vmin=0.0, vmax=1.0 if wait else (h.median or 1.0) * 1.1)
    ax.set_yticks(range(len(h.labels)), [label + (" ◀" if label in chart.flagged else "") for label in h.labels])
    ax.set_xlabel("seconds")
    ax.set_ylabel(h.who)
    fig.colorbar(image, ax=ax, label=h.unit)
    if chart.note:
        ax.text(0.0, -0.18, chart.note, transform=ax.transAxes, fontsize="small", color="0.3")
