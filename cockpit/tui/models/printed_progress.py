"""Each rank's step and step rate as its printed progress lines say them (``step 16 loss 0.1234``, HF Trainer's
printed dict, ...: cockpit.plot.printed), for the rank table of a script that writes no cockpit metrics: the
watchdog's status.json counts only cockpit's metrics files, else the hook's collectives, and a plain script's
table said STEP 0 while its log said step 250.

Kept in the feed process, which reads every line of every rank anyway (cockpit.tui.models.feed_state): a batch
of one source without ``loss`` costs one search in all, and one with it is read from its end, where its last
progress line that names its step says it (PrintedSteps.feed). The step is the one the charts give the same line
(cockpit.plot.printed.StepCount: the line's own, else its count).

The rate is the watchdog's (cockpit.hang.progress): steps over the last ``WINDOW`` seconds of looks at least
``LOOK`` apart, a look being when the feed read the line. Lines read within ``LOOK`` of the last look move that
look's step on, so a long history read in one go at the view's opening is one look, not thousands of steps in
a few milliseconds. Pure: no IO, no threads.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from cockpit.hang.progress import window_rate
from cockpit.plot.printed import StepCount, readings

WINDOW = 10.0  # seconds: the watchdog's rate window (cockpit.hang.progress.Monitor's default)
LOOK = 1.0  # seconds between two looks at least: the watchdog looks once a second
KEEP = 32  # looks kept per source: WINDOW / LOOK and some
COUNT_MOST = 2_000  # progress lines without a step of their own counted per batch of a rank, at most
_LOSS = re.compile("loss", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class PrintedProgress:
    """One rank's printed progress: its last ``step``, when that was read (``at``, time.time()), and its rate
    (steps/s over the WINDOW before ``at``; None: fewer than two looks in it)."""

    step: int
    at: float
    rate: float | None

    def rate_at(self, now: float) -> float | None:
        """The rate as the watchdog would say it at ``now``: none once the rank printed no step for a WINDOW."""
        return self.rate if now - self.at <= WINDOW else None


class _Source:
    __slots__ = ("count", "looks")

    def __init__(self) -> None:
        self.count = StepCount()
        self.looks: list[tuple[float, int]] = []  # (time read, step), the last KEEP


class PrintedSteps:
    """The printed progress of every source fed to it (a rank's log read from its start, in order)."""

    def __init__(self) -> None:
        self._sources: dict[tuple, _Source] = {}

    def feed(self, source: tuple, lines: Sequence[tuple[str, float]]) -> bool:
        """Read ``lines`` ((text, time read)) of ``source``, a rank; True when its step moved.

        Read from the end: where the last progress line names its step, that line alone says the step (a storm of
        64 ranks x 1,000 ``step=N loss=X`` lines a second parsed whole cost the feed seconds of CPU a second).
        Only lines without a step of their own are all read, to count them, at most COUNT_MOST a batch: past
        that the count is not kept and the rank's table row goes back to the watchdog's figure. A log that mixes
        both forms may count differently from the charts, which read every line."""
        if source[1] == "agent":
            return False
        for i in range(len(lines) - 1, -1, -1):
            text, t = lines[i]
            found = readings(text) if _LOSS.search(text) else []
            if not found:
                continue
            state = self._state(source)
            if found[-1].step is not None:
                return _look(state.looks, t, found[-1].step)
            return self._count(state, lines[:i + 1])
        return False

    def _count(self, state: _Source, lines: Sequence[tuple[str, float]]) -> bool:
        loss = [(text, t) for text, t in lines if _LOSS.search(text)]
        if len(loss) > COUNT_MOST or state.count.counted is None:
            state.count.counted, state.looks[:] = None, []  # not counted: no printed step for this rank
            return False
        moved = False
        for text, t in loss:
            for reading in readings(text):
                step = state.count.step(reading)
                if step is not None:
                    moved = _look(state.looks, t, step) or moved
        return moved

    def _state(self, source: tuple) -> _Source:
        state = self._sources.get(source)
        if state is None:
            state = self._sources[source] = _Source()
        return state

    def progress(self, source: tuple) -> PrintedProgress | None:
        state = self._sources.get(source)
        if state is None or not state.looks:
            return None
        t, step = state.looks[-1]
        return PrintedProgress(step, t, window_rate(state.looks, t, WINDOW))


def _look(looks: list[tuple[float, int]], t: float, step: int) -> bool:
    """Put (t, step) into ``looks``: a new look LOOK after the last, else the last one's step moved on. A step
    back (an attempt resumed from its checkpoint, recover:) starts the looks again: no negative rate."""
    if looks and looks[-1][1] == step:
        return False
    if looks and step < looks[-1][1]:
        looks.clear()
    if looks and t - looks[-1][0] < LOOK:
        looks[-1] = (looks[-1][0], step)
    else:
        looks.append((t, step))
        del looks[:-KEEP]
    return True
