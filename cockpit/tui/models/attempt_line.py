"""The run view's timeline of a run's attempts (the job's ``recover:``), as text: pure, no textual, no IO.

One bar across the width, each attempt's share of the wall time drawn in its own number, the time between
attempts (noticing the end, tearing down, starting again) as dots, and how each ended at its right edge
(x: failure, s: stall, ■: stopped, r: requeued by Slurm, ✓: succeeded, ▶: still running); then one line per
attempt that says when, how it ended, where it failed, the step it reached, and the run's goodput. Why text and
not a chart widget: the line must read the same in a screenshot, a log of the TUI test, and on a 80-column terminal.
"""

from __future__ import annotations

from collections.abc import Sequence

from cockpit.run.attempts import Attempt, pauses

ENDS = {"failure": "x", "stall": "s", "stopped": "■", "requeued": "r", "succeeded": "✓", None: "▶"}
GAP = "·"
EPS = 1e-6  # a cell boundary computed as 52.99999999 is 53: the last attempt's end in the last cell, not before it


def bar(attempts: Sequence[Attempt], now: float, width: int) -> str:
    """The attempts across ``width`` cells, from the first attempt's start to the last one's end (or ``now``)."""
    if not attempts or width < 2 * len(attempts):
        return ""
    begin = attempts[0].started
    end = max(now if attempts[-1].ended is None else attempts[-1].ended, begin + 1e-6)
    scale = width / (end - begin)
    cells = [GAP] * width
    for a in attempts:
        lo = min(int((a.started - begin) * scale + EPS), width - 1)
        hi = min(max(int(((a.ended if a.ended is not None else now) - begin) * scale + EPS), lo + 1), width)
        mark = str(a.attempt % 10)
        for i in range(lo, hi):
            cells[i] = mark
        cells[hi - 1] = ENDS.get(a.end, "?")
    return "".join(cells)


def rows(attempts: Sequence[Attempt], now: float) -> list[str]:
    """One line per attempt: its number, start (seconds into the run), length, end and culprit, step reached."""
    if not attempts:
        return []
    begin = attempts[0].started
    out = []
    for a, pause in zip(attempts, pauses(list(attempts)), strict=True):
        took = (a.ended if a.ended is not None else now) - a.started
        end = a.end or "running"
        who = f" rank {a.culprit_rank} on {a.culprit_host}" if a.culprit_rank is not None else ""
        step = f", step {a.step}" if a.step is not None else ""
        resumed = f" (resumed from {a.resumed_from})" if a.resumed_from is not None else ""
        lost = f", lost {a.lost_s:.0f} s" if a.lost_s else ""
        cause = f": {a.cause}" if a.cause and a.end in ("failure", "stall") else ""
        after = f", resumed after {pause:.0f} s stopped" if a.resumed else ""
        out.append(f"#{a.attempt} +{a.started - begin:.0f} s{after}, {took:.0f} s, {end}{who}{step}{resumed}{lost}"
                   f"{cause}")
    return out


def timeline(attempts: Sequence[Attempt], goodput: float | None, now: float, width: int) -> str:
    """The whole panel: the bar with the goodput, then the rows; "" for a run of one attempt (nothing to show)."""
    if len(attempts) < 2:
        return ""
    head = f"attempts {len(attempts)}"
    if goodput is not None:
        head += f" · goodput {goodput:.0%}"
    line = bar(attempts, now, max(width - len(head) - 1, 2 * len(attempts)))
    return "\n".join([f"{head} {line}", *(w for r in rows(attempts, now) for w in wrapped(r, width))])


INDENT = "   "  # a row's second line, under its text rather than its number
ROW_LINES = 2  # at most, per row: the panel must leave the log its rows at 80x24


def wrapped(row: str, width: int) -> list[str]:
    """``row`` in lines of at most ``width``: cut at its end, it lost the cause and where the attempt failed (the
    part a reader wants) at 80 columns; a row longer than ROW_LINES lines ends in "…"."""
    if len(row) <= width or width <= 2 * len(INDENT):
        return [row[:width]]
    import textwrap

    lines = textwrap.wrap(row, width, subsequent_indent=INDENT, break_on_hyphens=False)
    if len(lines) > ROW_LINES:
        lines = lines[:ROW_LINES]
        lines[-1] = lines[-1][:width - 1] + "…"
    return lines
