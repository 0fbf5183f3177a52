"""`cockpit ps` filters, in the spellings squeue and docker users already type: ``--state running,failed`` (squeue's
``-t/--states``), ``--name 'demo*'`` (squeue's ``-n``), ``--since 2h`` (docker's and journalctl's), ``--last 5`` / ``-n
5`` (docker's). They act on the listing's rows (cockpit.insight.listing): no run directory is read again to filter.

Name and age need nothing a run may change, so they act first (and a run they leave out is never worked out again);
the state acts after a run still going was worked out again (its supervisor may have died: running -> lost), and
``--last`` after everything, on what is left. The argparse types below turn bad input into one line naming what is
accepted (argparse: exit 2, no traceback).
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from cockpit.insight.listing import Listed
from cockpit.run.status import STATES
from cockpit.run.store import UNREADABLE

GROUPS: dict[str, tuple[str, ...]] = {
    "active": ("starting", "running"),  # what squeue lists by default; docker ps without -a
    "ended": ("succeeded", "failed", "stopped", "lost", "unsubmitted"),
    # the words squeue and docker use for the same states
    "pending": ("starting",), "completed": ("succeeded",), "cancelled": ("stopped",), "canceled": ("stopped",),
    "exited": ("succeeded", "failed", "stopped", "lost", "unsubmitted"),
}
KNOWN = (*STATES, UNREADABLE)
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def states(text: str) -> frozenset[str]:
    """``running,failed`` (any case, commas or spaces) -> the run states; a word that is none: an error naming them."""
    out: set[str] = set()
    for word in filter(None, re.split(r"[,\s]+", text.lower())):
        if word in KNOWN:
            out.add(word)
        elif word in GROUPS:
            out.update(GROUPS[word])
        else:
            close = difflib.get_close_matches(word, [*KNOWN, *GROUPS], n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise argparse.ArgumentTypeError(f"no run state {word!r}: {hint}the states are {', '.join(KNOWN)}; "
                                             f"also {', '.join(GROUPS)} (e.g. --state running,failed)")
    if not out:
        raise argparse.ArgumentTypeError("no state given (e.g. --state running,failed)")
    return frozenset(out)


def since(text: str, now: float | None = None) -> float:
    """When ``text`` says, as a time.time() value: ``90s``, ``30m``, ``2h``, ``3d``, ``1w`` ago (a leading ``-`` or
    a trailing `` ago`` allowed), ``today``, ``yesterday``, or a local date/time ``2026-11-27`` /
    ``2026-11-27T10:00`` / ``2026-11-27 10:00:30``."""
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


@dataclass(frozen=True)
class RunFilter:
    """What `ps` was asked to keep; every field None/empty: everything."""

    states: frozenset[str] | None = None
    names: tuple[str, ...] = ()
    since: float | None = None  # time.time() value: runs created at or after it
    last: int | None = None  # the newest N of what the others keep

    @classmethod
    def from_args(cls, args) -> RunFilter:
        chosen: set[str] = set()
        for group in getattr(args, "state", None) or ():
            chosen |= group
        names = tuple(n for text in getattr(args, "name", None) or () for n in text.split(",") if n)
        return cls(frozenset(chosen) or None, names, getattr(args, "since", None), getattr(args, "last", None))

    @property
    def active(self) -> bool:
        return bool(self.states or self.names or self.since is not None or self.last is not None)

    @property
    def needs_rows(self) -> bool:
        """Whether the listing must keep each run's row (its name and state), not only its path."""
        return bool(self.states or self.names)

    def early(self, listed: list[Listed]) -> list[Listed]:
        """Keep the runs of the wanted names and ages (nothing about them changes when a run is worked out again)."""
        return [item for item in listed
                if (self.since is None or item.created >= self.since)
                and (not self.names or (item.status is not None and self._named(item.status.name,
                                                                                 item.status.run_id)))]

    def late(self, listed: list[Listed]) -> list[Listed]:
        """Keep the runs in the wanted states, then the newest ``last`` of them (listed oldest first)."""
        kept = [item for item in listed if not self.states or (item.status is not None
                                                                and item.status.state in self.states)]
        return kept[-self.last:] if self.last else kept

    def _named(self, name: str, run_id: str) -> bool:
        """A glob (``demo*``) matched against the job's name and the run id, or a plain word: the name, or part of
        the run id."""
        return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(run_id, p)
                   or (not any(c in p for c in "*?[") and p in run_id) for p in self.names)

    def said(self) -> str:
        """The filters as the user would type them again, for "no runs match ..."."""
        parts = [f"--state {','.join(sorted(self.states))}"] if self.states else []
        parts += [f"--name {n}" for n in self.names]
        if self.since is not None:
            parts.append(f"--since {datetime.fromtimestamp(self.since).isoformat(' ', 'seconds')}")
        return " ".join(parts)


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
