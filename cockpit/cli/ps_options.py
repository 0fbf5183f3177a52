"""`cockpit ps`'s filter options and their argparse types: ``--state running,failed`` (squeue's ``-t/--states``),
``--name 'demo*'`` (squeue's ``-n``), ``--since 2h`` (docker's and journalctl's), ``--last 5`` / ``-n 5`` (docker's).
What they keep is cockpit.cli.ps_filter's.

Apart from ps_filter, because `cockpit --help` builds `ps`'s parser too: this module imports nothing of cockpit's
and no dataclass at module level, so the help starts without the listing, the run records and dataclasses (issue 29:
a start at the Python floor). The argparse types turn bad input into one line naming what is accepted (argparse:
exit 2, no traceback).
"""

from __future__ import annotations

import argparse
import re
import time

GROUPS: dict[str, tuple[str, ...]] = {
    "active": ("starting", "running"),  # what squeue lists by default; docker ps without -a
    "ended": ("succeeded", "failed", "stopped", "lost", "unsubmitted"),
    # the words squeue and docker use for the same states
    "pending": ("starting",), "completed": ("succeeded",), "cancelled": ("stopped",), "canceled": ("stopped",),
    "exited": ("succeeded", "failed", "stopped", "lost", "unsubmitted"),
}
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def known() -> tuple[str, ...]:
    """Every run state a run can be listed in (imported when a --state is given, not for the help)."""
    from cockpit.run.status import STATES
    from cockpit.run.store import UNREADABLE

    return (*STATES, UNREADABLE)


def states(text: str) -> frozenset[str]:
    """``running,failed`` (any case, commas or spaces) -> the run states; a word that is none: an error naming them."""
    out: set[str] = set()
    every = known()
    for word in filter(None, re.split(r"[,\s]+", text.lower())):
        if word in every:
            out.add(word)
        elif word in GROUPS:
            out.update(GROUPS[word])
        else:
            import difflib

            close = difflib.get_close_matches(word, [*every, *GROUPS], n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise argparse.ArgumentTypeError(f"no run state {word!r}: {hint}the states are {', '.join(every)}; "
                                             f"also {', '.join(GROUPS)} (e.g. --state running,failed)")
    if not out:
        raise argparse.ArgumentTypeError("no state given (e.g. --state running,failed)")
    return frozenset(out)


def since(text: str, now: float | None = None) -> float:
    """When ``text`` says, as a time.time() value: ``90s``, ``30m``, ``2h``, ``3d``, ``1w`` ago (a leading ``-`` or
    a trailing `` ago`` allowed), ``today``, ``yesterday``, or a local date/time ``2026-11-27`` /
    ``2026-11-27T10:00`` / ``2026-11-27 10:00:30``."""
    from datetime import datetime, timedelta

    now = time.time() if now is None else now
    word = text.strip().lower()
    midnight = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
    if word in ("today", "yesterday"):
        return (midnight - timedelta(days=word == "yesterday")).timestamp()
    if m := re.fullmatch(r"-?\s*(\d+(?:\.\d+)?)\s*([smhdw])(?:\s+ago)?", word):
        return now - float(m.group(1)) * UNITS[m.group(2)]
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"cannot read {text!r} as a time: use an age (90s, 30m, 2h, 3d, 1w), today, yesterday, or a local "
            "date/time (2026-11-27, 2026-11-27T10:00)") from None


def add_filter_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state", "--states", "-t", type=states, action="append", metavar="STATE[,STATE]",
                   help="only runs in these states (squeue's -t): starting, running, succeeded, failed, stopped, "
                        "lost, unreadable; active (starting, running), ended (the four final states)")
    p.add_argument("--name", action="append", metavar="GLOB", help="only runs whose job name or run id matches "
                   "(demo*, '*sweep*'; a plain word: the name, or part of the run id); repeatable")
    p.add_argument("--since", type=since, metavar="WHEN", help="only runs created since: an age (90s, 30m, 2h, "
                   "3d, 1w), today, yesterday, or a local date/time (2026-11-27T10:00)")
    p.add_argument("--last", "-n", type=_count, metavar="N", help="only the N newest runs (after the other "
                   "filters), as docker ps -n")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of runs, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: the number of runs to show is at least 1")
    return value
