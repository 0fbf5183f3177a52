"""Files that no inotify watch covers (NFS, Lustre, no inotify here: forced with ``notify=False``) are polled each
on its own backed-off schedule (cockpit.logs.due): soon while a file gives lines, less and less often while it
is quiet, all quiet files together within a budget of polls a second. Nothing is lost by waiting longer: the
file keeps what was written, and the next poll reads all of it."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from cockpit.logs import due as due_mod
from cockpit.logs.due import DueSources
from cockpit.logs.tail import Line, Tailer

POLL, QUIET = 0.01, 0.05


def schedule(n_sources: int) -> DueSources:
    d = DueSources(notify=False, poll=POLL, quiet=QUIET)
    for s in range(n_sources):
        d.add(s, f"/nonexistent/dir/rank-{s}.log")
    return d


def intervals(d: DueSources, source: int, gots: list[bool], now: float = 0.0) -> list[float]:
    """Poll ``source`` at each of its turns with these outcomes; the waits between the turns."""
    out = []
    for got in gots:
        d.polled(source, got, now)
        turn = d._next[source][0]
        out.append(turn - now)
        now = turn
    return out


def test_a_quiet_file_backs_off_to_the_quiet_pace_and_one_that_gives_lines_is_polled_soon_again():
    d = schedule(1)
    waits = intervals(d, 0, [False] * 6 + [True, False], now=0.003)
    grid = QUIET / 2  # a quiet file's turn falls on this grid: up to one grid step later
    want = [POLL, 2 * POLL, 4 * POLL, QUIET, QUIET, QUIET, POLL, 2 * POLL]
    assert all(w - 1e-9 <= got < w + grid for w, got in zip(want, waits, strict=True)), waits
    assert waits[0] == pytest.approx(POLL) and waits[-1] == pytest.approx(2 * POLL)  # a busy file: no grid


def test_many_quiet_files_together_stay_within_the_budget_of_polls_a_second():
    many = 4 * due_mod.QUIET_POLLS_PER_S  # the ceiling would be 4 s: it stops at MAX_QUIET_S
    d = schedule(many)
    for s in range(many):
        d.polled(s, False, 0.0)
    for s in range(many):  # the back-off grows while every file is known to the schedule
        intervals(d, s, [False] * 12)
    assert max(interval for _, interval in d._next.values()) == due_mod.MAX_QUIET_S
    few = schedule(20)
    for s in range(20):
        intervals(few, s, [False] * 12)
    assert max(interval for _, interval in few._next.values()) == QUIET  # few files: the caller's quiet pace
    # what the budget buys: the quiet files' polls a second, at most the budget or one a file a MAX_QUIET_S
    mid = schedule(3 * due_mod.QUIET_POLLS_PER_S // 4)
    for s in range(len(mid._dir_of)):  # every file's first poll (the loop's first, full poll), then their turns
        mid.polled(s, False, 0.0)
    for s in range(len(mid._dir_of)):
        intervals(mid, s, [False] * 12)
    rate = sum(1 / interval for _, interval in mid._next.values())
    assert rate <= due_mod.QUIET_POLLS_PER_S * 1.01


def test_due_gives_the_files_whose_turn_came_once_each_and_the_next_turn():
    d = schedule(3)
    assert d.due(3, 0.0) == {0, 1, 2}  # a file just added is read at once
    d.polled(0, True, 0.0)  # turn at 0.01
    d.polled(1, False, 0.0)  # first poll: turn at 0.01 too
    d.polled(2, False, 0.0)
    intervals(d, 2, [False, False, False])  # quiet: its turn comes later
    assert d.next_poll() == POLL
    assert d.due(3, 0.005) == set()
    assert d.due(3, POLL) == {0, 1}
    assert d.due(3, POLL) == set()  # given once
    assert d.next_poll() is not None and d.next_poll() > POLL
    d.again(2)  # something left to read: due whatever its turn
    assert d.due(3, POLL) == {2}


def test_a_removed_file_has_no_turn_left():
    d = schedule(2)
    assert d.due(2, 0.0) == {0, 1}
    d.polled(0, False, 0.0)
    d.polled(1, False, 0.0)
    d.remove(0, "/nonexistent/dir/rank-0.log")
    assert d.due(2, 1.0) == {1}
    assert d.next_poll() is None


def test_every_line_of_many_quiet_files_comes_once_in_order_when_polled_on_their_turns(tmp_path):
    """512 quiet files, long enough quiet to have backed off; then lines to random files at random moments: each
    comes once, in order, within a second or so of being written (the longest turn plus the test's load)."""
    paths = [tmp_path / f"rank-{r}.log" for r in range(512)]
    for p in paths:
        p.write_bytes(b"")
    rng = random.Random(29)
    plan = [(rng.randrange(len(paths)), f"line {n}") for n in range(200)]

    async def main() -> tuple[list[Line], float]:
        lines: list[Line] = []
        async with Tailer(notify=False, lossless=True, idle_poll_interval=QUIET, batch_window=0.0) as tailer:
            for r, p in enumerate(paths):
                tailer.add(r, p)
            first = asyncio.ensure_future(tailer.next_batch())
            await asyncio.sleep(1.5)  # backed off
            late = 0.0
            for i, (r, text) in enumerate(plan):
                with open(paths[r], "a") as f:
                    f.write(f"{text} {time.time():.6f}\n")
                if i % 20 == 0:
                    await asyncio.sleep(rng.uniform(0.0, 0.3))
            deadline = time.monotonic() + 20
            batch = await first
            while True:
                lines.extend(batch.lines)
                if len(lines) >= len(plan) or time.monotonic() > deadline:
                    break
                batch = await asyncio.wait_for(tailer.next_batch(), max(0.01, deadline - time.monotonic()))
            for line in lines:
                late = max(late, line.t_read - float(line.text.rsplit(" ", 1)[1]))
            return lines, late

    lines, late = asyncio.run(asyncio.wait_for(main(), 60))
    assert sorted((x.source, x.text.rsplit(" ", 1)[0]) for x in lines) == sorted(plan)
    by_source: dict[int, list[int]] = {}
    for x in lines:
        by_source.setdefault(x.source, []).append(int(x.text.split()[1]))
    assert all(seq == sorted(seq) for seq in by_source.values())
    assert late < due_mod.MAX_QUIET_S + 2.0, late  # the longest turn, plus slack for a loaded machine
