"""Identical lines of many ranks shown once: `cockpit logs -f` (and `run`, `attach`) of a run of FOLD_FROM
ranks or more prints "[ranks 0-4095] step 100 loss 0.52" where each rank wrote "step 100 loss 0.52", as
Ray deduplicates its workers' repeated lines; ``--no-fold`` prints each rank's line with its own prefix.

A line is held at most HOLD seconds from when the first rank's copy arrived, so the other ranks' copies (the
ranks of a synchronous job print within milliseconds of each other, a poll or two of the files apart) can join
it; a line no other rank repeats is shown HOLD late, alone, with its own [host:rank]. A batch that holds many
lines of each rank (the catch-up of lines written before) is taken a line of each rank at a time.

Nothing is dropped and each rank's lines keep their order: a rank's line joins a held group only if that group
came after every group the rank already has a line in, and groups are shown in the order they were made.
Memory is bounded by what arrives in HOLD seconds (and by MAX_HELD lines: past that, the oldest groups are
shown at once).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from cockpit.hang.words import spans

FOLD_FROM = 9  # ranks: a run of fewer is shown a line per rank, as it always was
HOLD = 0.15  # seconds a line waits for the other ranks' copies
MAX_HELD = 200_000  # lines held at once, at most
MAX_LABEL = 60  # characters of rank ranges in a folded line's label; past that, their number


class Group:
    """One text, and the ranks (sources) that wrote it, in the order their copies came (a plain class with
    slots: one is made per line that no other rank repeats, tens of thousands a second at 4,096 ranks)."""

    __slots__ = ("index", "since", "sources", "text")

    def __init__(self, text: str, index: int, since: float, source: tuple):
        self.text, self.index, self.since, self.sources = text, index, since, [source]


class LineFold:
    """Lines in (``feed``), text out: at once when a group has every rank (``expect``), else after HOLD (a timer
    on the running event loop calls ``emit``), and whatever is left on ``flush``."""

    def __init__(self, prefix: Callable[[tuple], str], emit: Callable[[str], None], hold: float = HOLD,
                 expect: int = 0):
        """``expect``: the ranks a group needs to be shown before HOLD (0: none is, every group waits HOLD)."""
        self.prefix, self.emit, self.hold, self.expect = prefix, emit, hold, expect
        self.held: list[Group] = []  # in the order they were made
        self.latest: dict[str, Group] = {}  # the newest held group of each text
        self.last: dict[tuple, int] = {}  # a source's newest held group (its index)
        self.count = self.made = 0
        self.timer: asyncio.TimerHandle | None = None

    def feed(self, lines) -> str:
        """Hold ``lines`` (cockpit.logs.filetail.Line: source, text, cut); the text due now."""
        now = time.monotonic()
        for line in _interleaved(lines):
            self._add(line.source, line.text, now, foldable=not line.cut and line.source[1] != "agent")
        out = self._due(now)
        self._arm()
        return out

    def flush(self) -> str:
        """Every held line, now (the run ended, or the viewer detached)."""
        out = self._render(self.held)
        self.held, self.latest, self.last, self.count = [], {}, {}, 0
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        return out

    def _add(self, source: tuple, text: str, now: float, foldable: bool) -> None:
        g = self.latest.get(text) if foldable else None
        if g is None or g.index <= self.last.get(source, -1):  # (a source already in g has last >= g.index)
            g = Group(text, self.made, now, source)
            self.made += 1
            self.held.append(g)
            if foldable:
                self.latest[text] = g
        else:
            g.sources.append(source)
        self.last[source] = g.index
        self.count += 1

    def _due(self, now: float) -> str:
        """The groups at the head that are complete or old enough (or past MAX_HELD), removed and rendered."""
        n = 0
        while n < len(self.held) and (now - self.held[n].since >= self.hold or self.count > MAX_HELD
                                      or 0 < self.expect <= len(self.held[n].sources)):
            self.count -= len(self.held[n].sources)
            n += 1
        if not n:
            return ""
        done, self.held = self.held[:n], self.held[n:]
        for g in done:
            if self.latest.get(g.text) is g:
                del self.latest[g.text]
        return self._render(done)

    def _arm(self) -> None:
        """A timer for the oldest held group, so it is shown HOLD after it came even when no line follows."""
        if self.timer is not None or not self.held:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a caller feeding by hand): flush is its way out
            return
        self.timer = loop.call_later(max(0.0, self.held[0].since + self.hold - time.monotonic()), self._fire)

    def _fire(self) -> None:
        self.timer = None
        text = self._due(time.monotonic())
        if text:
            self.emit(text)
        self._arm()

    def _render(self, groups: list[Group]) -> str:
        return "".join(f"{self._label(g.sources)} {g.text}\n" for g in groups)

    def _label(self, sources: list[tuple]) -> str:
        if len(sources) == 1:
            return self.prefix(sources[0])
        ranks = spans([int(source[1]) for source in sources], ",")  # (host, rank): an agent's line never folds
        return f"[ranks {ranks}]" if len(ranks) <= MAX_LABEL else f"[{len(sources):,} ranks]"


def _interleaved(lines: list) -> list:
    """A batch's lines (each source's together: a catch-up read gives many of one rank, then the next's) as the
    ranks wrote them side by side: every source's first line, then every source's second, ...: the order in which
    the same line of different ranks can fold, each source's own order kept."""
    by_source: dict[tuple, list] = {}
    for line in lines:
        by_source.setdefault(line.source, []).append(line)
    if len(by_source) < 2 or len(by_source) == len(lines):
        return lines
    queues = list(by_source.values())
    return [q[i] for i in range(max(map(len, queues))) for q in queues if i < len(q)]


def line_fold(run_dir: Path, args, prefix: Callable[[tuple], str], emit: Callable[[str], None]) -> LineFold | None:
    """The fold for a follower of ``run_dir``, or None: ``--no-fold``, ``--quiet``, or a run of fewer than
    FOLD_FROM ranks."""
    from cockpit.run.store import read_status

    status = read_status(run_dir)
    world_size = status.world_size if status is not None else None
    if getattr(args, "no_fold", False) or getattr(args, "quiet", False) or (world_size or 0) < FOLD_FROM:
        return None
    every = not (getattr(args, "rank", None) or getattr(args, "host", None))  # all ranks followed: wait for all
    return LineFold(prefix, emit, expect=world_size or 0 if every else 0)


def folded_states(said: dict[str, list[int]], world_size: int) -> str:
    """What each rank is doing (the Ctrl-C report of `cockpit run`): '0: step 5, 1: step 4' for a few ranks; for
    FOLD_FROM or more, the ranks saying the same as ranges, the fewest first: '3073: step 99; 0-3072,3074-4095:
    step 100'."""
    if world_size < FOLD_FROM:
        return ", ".join(f"{r}: {what}" for r, what in sorted((r, w) for w, rs in said.items() for r in rs))
    return "; ".join(f"{spans(rs, ',')}: {what}" for what, rs in sorted(said.items(), key=lambda kv: (len(kv[1]),
                                                                                                     kv[1][0])))
