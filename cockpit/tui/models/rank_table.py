"""The run view's rank table, as pure formatting: a row per source (rank or torchrun agent) with its last
step, step rate, last-line age and state (exit code, or what cockpit.hang's watchdog says: stall, stop,
slow). Cells are short and fixed-width so the side panel never jumps as they change; SOURCE is as wide as
the run's labels (source_width), set when its sources change."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from rich.text import Text

from cockpit.plot.series import METRICS, UNITS, RankSeries
from cockpit.plot.sources import METRICS as METRICS_FILE
from cockpit.plot.sources import PRINTED
from cockpit.run.progress import RankProgress
from cockpit.tui.models.printed_progress import PrintedProgress


def short_age(seconds: float) -> str:
    """At most 4 characters, whole units: a rank silent for minutes stands out, tenths would only flicker."""
    seconds = max(0.0, seconds)
    if seconds < 100:
        return f"{int(seconds)}s"
    return f"{int(seconds // 60)}m" if seconds < 6000 else f"{int(seconds // 3600)}h"


COLUMNS = (("src", "SOURCE", 9), ("step", "STEP", 5), ("rate", "/s", 4), ("age", "LAST", 4), ("st", "ST", 5))
SOURCE_MAX = 18  # SOURCE at most: a longer label is cut in its host (source_label), the side panel stays narrow
PAD = 2  # a DataTable column's cell padding, one on each side


def source_width(labels: Iterable[str]) -> int:
    """SOURCE's width: its longest label (``node0:agent`` was cut to ``node0:age``), at least the width "all
    ranks" needs and at most SOURCE_MAX."""
    return min(SOURCE_MAX, max([COLUMNS[0][2], *map(len, labels)]))


def source_label(text: str, width: int) -> str:
    """A ``host:rank`` label in ``width`` cells: the host cut with "…", its rank (or ``agent``) kept whole."""
    if len(text) <= width:
        return text
    host, _, rank = text.rpartition(":")
    keep = width - len(rank) - 2
    return f"{host[:keep]}…:{rank}" if host and keep > 0 else text[:width - 1] + "…"


def table_width(src_width: int) -> int:
    """The table's width in cells with SOURCE ``src_width`` wide (38 - 1 at the default: the side panel's)."""
    return src_width + sum(width for _, _, width in COLUMNS[1:]) + PAD * len(COLUMNS)


SIDE_WIDTH = table_width(COLUMNS[0][2]) + 1  # app.tcss's #run-side (and, under 100 columns, #ranks): 38
FLAGS = {"stalled": ("stall", "bold red"), "stopped": ("stop", "bold red"), "straggler": ("slow", "bold yellow"),
         "culprit": ("STUCK", "bold red"), "waiting": ("wait", "yellow")}


def shown_progress(rec: RankProgress | None, printed: PrintedProgress | None, host: str,
                   now: float) -> RankProgress | None:
    """The rank's record as the table shows it: the watchdog's, but where that has no cockpit metrics for the
    rank (its step counts the hook's collectives, or there is none yet), the step and rate its printed progress
    lines say (``printed``: the feed's, cockpit.tui.models.printed_progress), as the charts read them. A script
    that prints ``step 250 loss 0.02`` showed STEP 0 (issue 33)."""
    if printed is None or (rec is not None and rec.step_source == "metrics"):
        return rec
    base = rec if rec is not None else RankProgress(host, "unknown")
    return replace(base, step=printed.step, step_source="printed", rate=printed.rate_at(now))


def rank_step(rec: RankProgress | None) -> str:
    step = rec.step if rec else None
    return "" if step is None else (str(step) if step < 100_000 else f"{step // 1000}k")


def rank_rate(rec: RankProgress | None) -> str:
    """Steps per second in at most 4 characters."""
    rate = rec.rate if rec else None
    return "" if rate is None else fmt_rate(rate)


def fmt_rate(rate: float) -> str:
    return f"{rate:.2f}"[:4] if rate < 10 else (f"{rate:.1f}" if rate < 100 else str(int(rate)))[:4]


def rank_state(rec: RankProgress | None, exit_code: int | None) -> Text | str:
    """The exit code once a rank ended; while it runs, what the watchdog says of it (stall, stop, slow)."""
    if exit_code is not None:
        return str(exit_code)
    word, style = FLAGS.get((rec.flag if rec else None) or "", ("", ""))
    return Text(word, style=style) if word else ""


def source_order(source: tuple) -> tuple:
    host, rank = source
    return (1, 0, host) if rank == "agent" else (0, rank, host)


def side_rate(series: RankSeries, origin: str | None, rec: RankProgress | None, final: bool, cells: int) -> str:
    """The side panel's rate line for ``series``'s rank (issue 33 item 8: the panel and the table said two
    rates for one rank). Where the table's /s counts what the panel's series counts (cockpit.train's metrics
    file, ``origin``; a script's printed lines, shown_progress; or the collectives of the hook's beats), the
    panel says the table's figure: one number, over the watchdog's last window (blank there: ``-`` here, e.g. a
    stalled rank). Otherwise (no table
    figure, an ended run's, or a script's own steps where the table counts collectives) its series' latest
    interval of ``cells``, and, where the table counts something else, what that is."""
    unit = UNITS[series.source]
    # what the table's count is called (its step_source) when it is this series' count, else None
    counted = {METRICS_FILE: "metrics", PRINTED: "printed"}.get(origin or "") if series.source == METRICS else "syncs"
    if rec is not None and counted is not None and rec.step_source == counted and (rec.rate is not None or not final):
        return f"{unit} {rank_rate(rec) or '-'}"
    rates = series.rate(cells)
    own = f"{unit} {rates[-1][1]:,.3g}" if rates else f"{unit}: -"
    other = rec is not None and rec.step_source == "syncs" and series.source == METRICS
    return own + (" (table /s: collectives)" if other else "")
