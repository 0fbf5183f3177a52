"""`cockpit plot RUN`: a run's loss per rank over steps, its rate per rank over time, or the rank x time heat
map of the rate, drawn in the terminal from the run's metrics files (the chart the TUI shows), and a PNG of it
when asked (for a report or a ticket). A sweep's trials share one chart, each labelled with its arguments.

Exit 0 with a chart drawn, 2 for bad input or nothing to draw (a run that recorded no points yet)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from cockpit.cli.common import EXIT_OK, EXIT_USAGE, UsageError


def add_plot_command(sub) -> None:
    p = sub.add_parser("plot", help="a run's loss / step rate per rank (or a sweep's trials) as a terminal "
                       "chart, and a PNG with --png")
    p.add_argument("run", metavar="RUN", help="run id, a unique prefix of one, last, or a run directory")
    p.add_argument("--metric", choices=("loss", "rate", "heat", "wait"), default="loss",
                   help="loss over steps (default); rate (steps/s) over time; heat: a rank x time map of the "
                   "rate, where a stall shows; wait: a rank x time map of the share of time each rank waited "
                   "in collectives, where a straggler shows (it hardly waits: the others wait for it)")
    p.add_argument("--rank", type=int, action="append", help="only this global rank (repeatable)")
    p.add_argument("--png", metavar="FILE", help="also write the chart to FILE as a PNG (needs matplotlib: "
                   "pip install 'cockpit[plot]')")
    p.add_argument("--width", type=_size, help="columns (default: the terminal's)")
    p.add_argument("--height", type=_size, help="lines (default: the terminal's, at most 30)")
    p.add_argument("--runs-dir")
    p.set_defaults(func=cmd_plot)


def _size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 10 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"{value} is out of range 10..1000")
    return value


def cmd_plot(args) -> int:
    from cockpit.cli.runs import CommandError, find, status_of
    from cockpit.plot.text import draw

    try:
        run_dir = find(args)
        status = status_of(run_dir)
    except CommandError as exc:
        raise UsageError(str(exc)) from None
    term = shutil.get_terminal_size((100, 30))
    width = args.width or term.columns
    height = args.height or max(10, min(30, term.lines - 2))
    chart = _chart(args, run_dir, status, width, height)
    lines = getattr(chart, "lines", None)
    empty = not lines if lines is not None else not chart.heat.labels
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    print(draw(chart, width, height, color))
    if empty:
        return EXIT_USAGE
    if args.png:
        _write_png(chart, args.png)
    return EXIT_OK


def _chart(args, run_dir, status, width: int, height: int):
    from cockpit.plot import chart as charts
    from cockpit.plot.source import RunSeries
    from cockpit.runs import is_sweep

    if is_sweep(status):
        return _sweep_chart(args, run_dir, status, width, height)
    reader = RunSeries(run_dir)
    reader.poll_all()
    series = reader.series()
    if args.rank:
        known = {s.rank for s in series}
        missing = sorted(set(args.rank) - known)
        if missing and series:
            raise UsageError(f"run {run_dir.name} has no points for rank {', '.join(map(str, missing))} "
                             f"(it has ranks {_ranges(sorted(known))})")
        series = charts.pick(series, args.rank)
    beats = charts.pick(reader.beats(), args.rank)
    return charts.build(args.metric, series, run_dir.name, width, height, beats)


def _sweep_chart(args, run_dir, status, width: int, height: int):
    from cockpit.plot import chart as charts
    from cockpit.plot.source import RunSeries
    from cockpit.sweep_trials import trial_rows

    trials = []
    for row in trial_rows(run_dir, status):
        reader = RunSeries(row.run_dir)
        reader.poll_all()
        rank0 = [s for s in reader.series() if s.rank == (args.rank or [0])[0]]
        trials.append((row, rank0[0] if rank0 else None))
    if args.metric == "loss":
        named = [(f"trial {row.index} {' '.join(row.args)}".strip(), s) for row, s in trials]
        return charts.trials_chart(named, f"{run_dir.name}: loss per trial", width)
    # rate and heat: one row / line per trial, the trial's index where a rank's would be
    series = [_as_rank(s, row.index) for row, s in trials if s is not None]
    chart = charts.build(args.metric, series, run_dir.name, width, height)
    return charts.relabel(chart, "rank", "trial")


def _as_rank(series, index: int):
    from dataclasses import replace

    return replace(series, rank=index)


def _ranges(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:16])) + (" ..." if len(ranks) > 16 else "")


def _write_png(chart, path: str) -> None:
    from cockpit.plot.png import PngError, write_png

    try:
        write_png(chart, path)
    except PngError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {path}", file=sys.stderr)
