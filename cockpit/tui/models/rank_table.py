"""The run view's rank table, as pure formatting: a row per source (rank or torchrun agent) with its last
step, step rate, last-line age and state (exit code, or what cockpit.hang's watchdog says: stall, stop,
slow). Cells are short and fixed-width so the side panel never jumps."""

from __future__ import annotations

from rich.text import Text

from cockpit.run.progress import RankProgress


def short_age(seconds: float) -> str:
    """At most 4 characters, whole units: a rank silent for minutes stands out, tenths would only flicker."""
    seconds = max(0.0, seconds)
    if seconds < 100:
        return f"{int(seconds)}s"
    return f"{int(seconds // 60)}m" if seconds < 6000 else f"{int(seconds // 3600)}h"


COLUMNS = (("src", "SOURCE", 9), ("step", "STEP", 5), ("rate", "/s", 4), ("age", "LAST", 4), ("st", "ST", 5))
FLAGS = {"stalled": ("stall", "bold red"), "stopped": ("stop", "bold red"), "straggler": ("slow", "bold yellow"),
         "culprit": ("STUCK", "bold red"), "waiting": ("wait", "yellow")}


def rank_step(rec: RankProgress | None) -> str:
    step = rec.step if rec else None
    return "" if step is None else (str(step) if step < 100_000 else f"{step // 1000}k")


def rank_rate(rec: RankProgress | None) -> str:
    """Steps per second in at most 4 characters."""
    rate = rec.rate if rec else None
    if rate is None:
        return ""
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
