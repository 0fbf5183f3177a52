"""The run view's rank table by groups (issue 32), as pure functions: past FLAT_UP_TO sources a row per rank is
4,096 rows nobody reads, so the ranks fold into groups, by node, by state, or by what they are doing (the
collective the hook's beats say each is inside: the live side's stack signature; `k` gathers the stacks
themselves), the outliers first, as STAT and NCCL's RAS print theirs: a group holding a stalled, stuck or failed
rank, then a straggler's or waiting rank's, then the rest, the smaller groups before the larger within a kind.

A group's row says who is in it and how they fare: its name, its slowest rank's step, its median rate, its
oldest last-line age, and how many ranks it holds (or its worst rank's flag, in that flag's colour).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from rich.text import Text

from cockpit.run.progress import RankProgress
from cockpit.tui.models.rank_table import FLAGS, fmt_rate, short_age, source_order

FLAT_UP_TO = 64  # sources shown one row each (today's table); more fold into groups
GROUPINGS = ("state", "node", "doing")
# how bad a rank's state is: 0 first (the outliers on top)
_SEVERITY = {"culprit": 0, "stalled": 0, "stopped": 0, "failed": 0, "straggler": 1, "waiting": 2}
_NAMES = {"culprit": "STUCK", "stalled": "stall", "stopped": "stop", "straggler": "slow", "waiting": "wait"}


class RankInfo(NamedTuple):
    """What the table knows of one source this second (the run view gives it with the row's cells). A tuple:
    4,096 of them a second, each one object made in a call (a frozen dataclass's __init__ set its six fields one
    by one, twice as slow) and without a __dict__ for the UI's garbage collector to scan."""

    step: int | None = None
    rate: float | None = None
    age: float | None = None  # seconds since its log's last line (None: an ended run, or none yet)
    flag: str | None = None  # the watchdog's (RankProgress.flag)
    exit_code: int | None = None
    doing: str | None = None  # the collective it is inside (RankProgress.collective)

    @classmethod
    def of(cls, rec: RankProgress | None, exit_code: int | None, age: float | None) -> RankInfo:
        if rec is None:
            return cls(None, None, age, None, exit_code)
        return cls(rec.step, rec.rate, age, rec.flag, exit_code, rec.collective)

    @property
    def state(self) -> str:
        """'failed', 'exited', a watchdog flag, or 'ok'."""
        if self.exit_code is not None:
            return "exited" if self.exit_code == 0 else "failed"
        return self.flag or "ok"

    @property
    def severity(self) -> int:
        return _SEVERITY.get(self.state, 3)


@dataclass(frozen=True)
class Group:
    key: str  # the row's key: "g:<grouping>:<name>"
    name: str
    sources: tuple[tuple, ...]  # in rank order
    severity: int  # its worst member's
    worst: str  # its worst member's state


def group_name(source: tuple, info: RankInfo, by: str) -> str:
    host, rank = source
    if by == "node":
        return str(host)
    if rank == "agent":
        return "agents"
    if by == "doing":
        return info.doing or ("ended" if info.exit_code is not None else "computing")
    state = info.state
    return f"exit {info.exit_code}" if state == "failed" else _NAMES.get(state, state)


def groups(sources: Iterable[tuple], infos: Mapping[tuple, RankInfo], by: str) -> list[Group]:
    """``sources`` folded by ``by`` (GROUPINGS), the outliers first (module docstring)."""
    members: dict[str, list[tuple]] = {}
    blank = RankInfo()
    for source in sorted(sources, key=source_order):
        members.setdefault(group_name(source, infos.get(source, blank), by), []).append(source)
    out = []
    for name, these in members.items():
        worst = min((infos.get(s, blank) for s in these), key=lambda i: i.severity)
        out.append(Group(f"g:{by}:{name}", name, tuple(these), worst.severity, worst.state))
    # outliers first; then the smaller groups (a node of one slow rank before the 511 of healthy ones); then
    # in rank order (nodes n000, n001, ...)
    return sorted(out, key=lambda g: (g.severity, len(g.sources) if g.severity < 3 else 0,
                                      source_order(g.sources[0])))


def group_cells(group: Group, infos: Mapping[tuple, RankInfo], expanded: bool) -> tuple:
    """A group's row: (label, slowest step, median rate, oldest age, count or worst flag)."""
    blank = RankInfo()
    got = [infos.get(s, blank) for s in group.sources]
    steps = [i.step for i in got if i.step is not None]
    rates = [i.rate for i in got if i.rate is not None]
    ages = [i.age for i in got if i.age is not None]
    style = FLAGS.get(group.worst, ("", "bold red" if group.worst == "failed" else ""))[1]
    label = Text(("▾" if expanded else "▸") + group.name[-8:], style=style)
    step = "" if not steps else (str(min(steps)) if min(steps) < 100_000 else f"{min(steps) // 1000}k")
    rate = fmt_rate(statistics.median(rates)) if rates else ""
    age = short_age(max(ages)) if ages else "-"
    count = str(len(group.sources)) if len(group.sources) < 100_000 else f"{len(group.sources) // 1000}k"
    return (label, step, rate, age, count)


def rows(found: list[Group], expanded: set[str]) -> list[tuple[str, Group | tuple]]:
    """The table's rows after "all ranks": (key, group) for a group's row, (key, source) for a rank of an
    expanded group under it."""
    out: list[tuple[str, Group | tuple]] = []
    for g in found:
        out.append((g.key, g))
        if g.key in expanded:
            out += [(repr(s), s) for s in g.sources]
    return out


def parse_rank(text: str, sources: Iterable[tuple]) -> tuple | str:
    """The source a "go to rank" answer names: a rank number ("3071"), or "host:rank" / "host" + "agent";
    else what is wrong, in words."""
    text = text.strip()
    known = list(sources)
    if not text:
        return "type a rank number (e.g. 3071), or host:agent for a torchrun agent"
    host, sep, rank = text.rpartition(":")
    if rank == "agent":
        hit = [s for s in known if s[1] == "agent" and s[0] == host]
        return hit[0] if hit else f"no torchrun agent on {host!r}"
    if not rank.isdigit():
        return f"{text!r} is not a rank: type a number (e.g. 3071)"
    hit = [s for s in known if s[1] == int(rank) and (not sep or s[0] == host)]
    ranks = [s[1] for s in known if isinstance(s[1], int)]
    span = f"0-{max(ranks)}" if ranks else "none yet"
    return hit[0] if hit else f"no rank {text} in this run (ranks {span})"
