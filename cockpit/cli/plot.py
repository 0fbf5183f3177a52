"""`cockpit plot RUN`: a run's loss per rank over steps, its rate per rank over time, or the rank x time heat
map of the rate, drawn in the terminal from the run's metrics files (the chart the TUI shows), and a PNG of it
when asked (for a report or a ticket). A sweep's trials share one chart, each labelled with its arguments.

Exit 0 with a chart drawn, 2 for bad input or nothing to draw (a run that recorded no points yet)."""

from __future__ import annotations

import os
import shutil
import sys

from cockpit.cli.common import EXIT_OK, EXIT_USAGE, UsageError, whole_number


def add_plot_command(sub) -> None:
    p = sub.add_parser("plot", help="a run's loss / step rate per rank (or a sweep's trials) as a terminal "
                       "chart, and a PNG with --png")
    p.add_argument("run", metavar="RUN", help="run id, a unique prefix of one, last, or a run directory")
    p.add_argument("--metric", choices=("loss", "rate", "heat", "wait"), default="loss",
                   help="loss over steps (default); rate (steps/s) over time; heat: a rank x time map of the "
                   "rate, where a stall shows; wait: a rank x time map of the share of time each rank waited "
                   "in collectives, where a straggler shows (it hardly waits: the others wait for it)")
    p.add_argument("--rank", type=int, action="append", help="only this global rank (repeatable)")
    p.add_argument("--log", action="store_true", help="loss and rate on a log y axis (a diverged trial "
                   "flattens the others on a linear one)")
    p.add_argument("--png", metavar="FILE", help="also write the chart to FILE as a PNG (needs matplotlib: "
                   "pip install 'cockpit[plot]')")
    p.add_argument("-f", "--follow", action="store_true", help="redraw every --every seconds until the run ends "
                   "(Ctrl-C leaves; the run goes on)")
    p.add_argument("--every", type=float, default=2.0, metavar="S", help="with --follow: seconds between "
                   "redraws (default 2)")
    p.add_argument("--width", type=whole_number(10, 1000), help="columns (default: the terminal's)")
    p.add_argument("--height", type=whole_number(10, 1000), help="lines (default: the terminal's, at most 30)")
    p.add_argument("--runs-dir")
    p.set_defaults(func=cmd_plot)


def cmd_plot(args) -> int:
    from cockpit.cli.runs import CommandError, find, status_of

    try:
        run_dir = find(args)
        status = status_of(run_dir)
    except CommandError as exc:
        raise UsageError(str(exc)) from None
    if not 0.2 <= args.every <= 3600:
        raise UsageError(f"--every {args.every:g} is out of range 0.2..3600 seconds")
    if args.every != 2.0 and not args.follow:
        raise UsageError("--every sets how often -f redraws (hint: cockpit plot RUN -f --every S)")
    readers: dict = {}
    if args.follow:
        return _follow(args, run_dir, status, readers)
    chart = _chart(args, run_dir, status, readers, *_size_of(args))
    print(_text(chart, args))
    return _finish(chart, args)


def _finish(chart, args) -> int:
    """The PNG when asked, and the exit code: 2 (said on stderr) when there was nothing to draw."""
    if _empty(chart):
        print(f"cockpit: nothing to draw: {chart.note}" + (" (no PNG written)" if args.png else ""),
              file=sys.stderr)
        return EXIT_USAGE
    if args.png:
        _write_png(chart, args.png)
    return EXIT_OK


def _follow(args, run_dir, status, readers: dict) -> int:
    """Redraw until the run ends (a last draw after), in place on a terminal; Ctrl-C leaves with 130."""
    import time

    from cockpit.cli.runs import refresh
    from cockpit.run.store import read_status

    tty = sys.stdout.isatty()
    try:
        while True:
            chart = _chart(args, run_dir, status, readers, *_size_of(args))
            print(("\x1b[H\x1b[2J" if tty else "") + _text(chart, args), flush=True)
            if status.final:
                break
            time.sleep(args.every)
            # read again, and a run whose supervisor died worked out (else a lost run is followed forever)
            status = refresh([(run_dir, read_status(run_dir) or status)])[0][1]
    except KeyboardInterrupt:
        return 130
    return _finish(chart, args)


def _size_of(args) -> tuple[int, int]:
    term = shutil.get_terminal_size((100, 30))
    return args.width or term.columns, args.height or max(10, min(30, term.lines - 2))


def _text(chart, args) -> str:
    from cockpit.plot.text import draw

    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    return draw(chart, *_size_of(args), color)


def _empty(chart) -> bool:
    lines = getattr(chart, "lines", None)
    return not lines if lines is not None else not chart.heat.labels


def _reader(readers: dict, run_dir):
    """The run directory's reader, kept across redraws (each poll reads only what was appended)."""
    from cockpit.plot.source import RunSeries

    reader = readers.get(run_dir)
    if reader is None:
        reader = readers[run_dir] = RunSeries(run_dir)
        reader.poll_all()
        for path, why in reader.skipped():  # said once, on the first read
            print(f"cockpit: {path}: skipped: {why}", file=sys.stderr)
    else:
        reader.poll_all()
    return reader


def _chart(args, run_dir, status, readers: dict, width: int, height: int):
    import time

    from cockpit.plot import chart as charts
    from cockpit.plot.source import run_clock
    from cockpit.run.store import is_sweep

    if is_sweep(status):
        return _sweep_chart(args, run_dir, status, readers, width, height)
    reader = _reader(readers, run_dir)
    series = reader.series()
    if args.rank:
        known = {s.rank for s in series}
        missing = sorted(set(args.rank) - known)
        if missing and series:
            raise UsageError(f"run {run_dir.name} has no points for rank {', '.join(map(str, missing))} "
                             f"(it has ranks {_ranges(sorted(known))})")
        series = charts.pick(series, args.rank)
    beats = charts.pick(reader.beats(), args.rank)
    ended = reader.ended()
    until, quiet = run_clock(status, time.time(), ended)
    return charts.build(args.metric, series, run_dir.name, width, height, beats, ended, args.log,
                        reader.span(), until, quiet)


def _sweep_chart(args, run_dir, status, readers: dict, width: int, height: int):
    from cockpit.insight.sweep_series import SweepSeries, sweep_chart

    if args.metric == "wait":
        raise UsageError(f"{run_dir.name} is a sweep: its trials are separate runs, whose ranks never wait for "
                         f"each other (hint: cockpit plot {run_dir / 'trial-0'} --metric wait)")
    sweep = readers.get(run_dir)
    if sweep is None:
        sweep = readers[run_dir] = SweepSeries(run_dir)  # kept across redraws: each poll reads what is new
    sweep.poll_all(status)
    rank = (args.rank or [0])[0]
    trials = sweep.trials(rank)
    if args.rank and not any(s is not None for _, s in trials) and any(s for _, s in sweep.trials(0)):
        raise UsageError(f"the trials of {run_dir.name} have no rank {rank} (each trial is a run of its own; "
                         "--rank picks the rank within every trial, default 0)")
    return sweep_chart(args.metric, trials, run_dir.name, width, height, args.log)


def _ranges(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:16])) + (" ..." if len(ranks) > 16 else "")


def _write_png(chart, path: str) -> None:
    from cockpit.plot.png import PngError, write_png

    try:
        write_png(chart, path)
    except PngError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {path}", file=sys.stderr)
