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
    """A text two or more ranks wrote, and those ranks (sources), in the order their copies came."""

    __slots__ = ("sources", "text")

    def __init__(self, text: str, sources: list[tuple]):
        self.text, self.sources = text, sources


class LineFold:
    """Lines in (``feed``), text out: at once when a group has every rank (``expect``), else after HOLD (a timer
    on the running event loop calls ``emit``), and whatever is left on ``flush``.

    What is held is the Line itself until a second rank's copy makes it a Group: a line no other rank repeats
    (most of a 4,096-rank catch-up) costs a list slot and a dict entry, no object of its own."""

    def __init__(self, prefix: Callable[[tuple], str], emit: Callable[[str], None], hold: float = HOLD,
                 expect: int = 0):
        """``expect``: the ranks a group needs to be shown before HOLD (0: none is, every group waits HOLD)."""
        self.prefix, self.emit, self.hold, self.expect = prefix, emit, hold, expect
        self.held: list = []  # Line or Group, in the order they came; held[i] has number base + i
        self.since: list[float] = []  # when each came
        self.base = 0
        self.latest: dict[str, int] = {}  # the number of the newest held entry of each text
        self.last: dict[tuple, int] = {}  # the number of a source's newest held entry
        self.count = 0  # lines held
        self.timer: asyncio.TimerHandle | None = None

    def feed(self, lines) -> str:
        """Hold ``lines`` (cockpit.logs.filetail.Line: source, text, cut); the text due now."""
        now = time.monotonic()
        for line in _interleaved(lines):
            self._add(line, now, foldable=not line.cut and line.source[1] != "agent")
        out = self._due(now)
        self._arm()
        return out

    def flush(self) -> str:
        """Every held line, now (the run ended, or the viewer detached)."""
        out = self._render(self.held)
        self.base += len(self.held)
        self.held, self.since, self.latest, self.count = [], [], {}, 0
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        return out

    def _add(self, line, now: float, foldable: bool) -> None:
        source, text = line.source, line.text
        at = self.latest.get(text, -1) if foldable else -1
        if at < self.base or at <= self.last.get(source, -1):  # (a source already in it has last >= at)
            at = self.base + len(self.held)
            self.held.append(line)
            self.since.append(now)
            if foldable:
                self.latest[text] = at
        else:
            entry = self.held[at - self.base]
            if isinstance(entry, Group):
                entry.sources.append(source)
            else:
                self.held[at - self.base] = Group(text, [entry.source, source])
        self.last[source] = at
        self.count += 1

    def _size(self, entry) -> int:
        return len(entry.sources) if isinstance(entry, Group) else 1

    def _due(self, now: float) -> str:
        """The entries at the head that are complete or old enough (or past MAX_HELD), removed and rendered."""
        n, held = 0, self.held
        while n < len(held) and (now - self.since[n] >= self.hold or self.count > MAX_HELD
                                 or 0 < self.expect <= self._size(held[n])):
            self.count -= self._size(held[n])
            n += 1
        if not n:
            return ""
        done, self.held, self.since = held[:n], held[n:], self.since[n:]
        for i, entry in enumerate(done, self.base):
            if self.latest.get(entry.text) == i:
                del self.latest[entry.text]
        self.base += n
        return self._render(done)

    def _arm(self) -> None:
        """A timer for the oldest held entry, so it is shown HOLD after it came even when no line follows."""
        if self.timer is not None or not self.held:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a caller feeding by hand): flush is its way out
            return
        self.timer = loop.call_later(max(0.0, self.since[0] + self.hold - time.monotonic()), self._fire)

    def _fire(self) -> None:
        self.timer = None
        text = self._due(time.monotonic())
        if text:
            self.emit(text)
        self._arm()

    def _render(self, entries: list) -> str:
        prefix = self.prefix
        return "".join(f"{self._label(e.sources)} {e.text}\n" if isinstance(e, Group) else
                       f"{prefix(e.source)} {e.text}\n" for e in entries)

    def _label(self, sources: list[tuple]) -> str:
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
