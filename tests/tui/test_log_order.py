"""The run view's "all ranks" of an ended run in time order (issue 33 item 7d): a log line has no time, so the
order is estimated from the metrics records' times (a line naming its step), each file's mtime (its last line)
and its process's start (its first line), each file's own order kept and a burst (a traceback) kept whole.
Pure values, and the feed's state over a run directory written the way a run writes it (no real run, no TUI:
well under a second)."""

from __future__ import annotations

import json
import os

from cockpit.logs.filetail import Line
from cockpit.logs.tail import Batch
from cockpit.run.store import RunStatus, create_run_dir, write_status
from cockpit.tui.models.feed_process import run_clocks
from cockpit.tui.models.feed_state import FeedState
from cockpit.tui.models.log_order import SourceClock, in_time_order, line_times

T0 = 1_795_000_000.0
R0 = ["[cockpit] start rank=0", "[cockpit] step=10 loss=0.5", "[cockpit] step=20 loss=0.4",
      "[cockpit] step=30 loss=0.3", "RuntimeError: Connection closed by peer", "[rank0]: exiting"]
R1 = ["[cockpit] start rank=1", "[cockpit] step=10 loss=0.5", "[cockpit] step=20 loss=0.4",
      "[cockpit] step=30 loss=0.3", "Traceback (most recent call last):", "RuntimeError: injected failure"]
# what the run did: rank 1 failed after step 30 (its log ends at 35 s), rank 0 lost it and ended at 40 s
EXPECTED = [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (1, 3), (1, 4), (1, 5), (0, 4), (0, 5)]


def clocks() -> dict:
    return {("n", 0): SourceClock(T0 + 40, {10: T0 + 10, 20: T0 + 20, 30: T0 + 30}, T0),
            ("n", 1): SourceClock(T0 + 35, {10: T0 + 10.1, 20: T0 + 20.1, 30: T0 + 30.1}, T0 + 0.5)}


def test_the_lines_of_all_ranks_in_time_order_each_ranks_order_kept():
    order = in_time_order({("n", 0): R0, ("n", 1): R1}, clocks())
    assert [(source[1], i) for source, i in order] == EXPECTED


def test_a_line_gets_the_time_of_the_next_known_one_and_times_never_go_back():
    resumed = ["step=10", "x", "step=20", "step=10", "y"]  # a resume repeats step 10: the file's order wins
    times = line_times(resumed, SourceClock(T0 + 99, {10: T0 + 50, 20: T0 + 20}))
    assert times == sorted(times) and times[:3] == [T0 + 20] * 3 and times[-1] == T0 + 99
    assert line_times(["a", "b"], SourceClock(None)) == [float("inf")] * 2  # nothing known: read order
    no_steps = line_times(["start", "warning", "Traceback", "Error"], SourceClock(T0 + 9, {}, T0))
    assert no_steps == [T0, T0 + 9, T0 + 9, T0 + 9]  # the first line at the start, the rest at the end


def ended_run(tmp_path):
    run_dir = create_run_dir(tmp_path, "demo-20261128-000000-abcd")
    (run_dir / "metrics").mkdir()
    for rank, (lines, end, late) in enumerate(((R0, 40, 0.0), (R1, 35, 0.1))):
        log = run_dir / "logs" / f"rank-{rank}.n.log"
        log.write_text("".join(line + "\n" for line in lines))
        os.utime(log, (T0 + end, T0 + end))
        with open(run_dir / "metrics" / f"rank-{rank}.jsonl", "w") as f:
            f.writelines(json.dumps({"step": s, "time": T0 + s + late, "loss": 0.5}) + "\n" for s in range(1, 31))
    status = RunStatus(run_id=run_dir.name, name="demo", launcher="local", job_file="/j.yaml", hosts=["n"],
                       world_size=2, state="failed", created=T0, started=T0, ended=T0 + 41, exit_code=1)
    write_status(run_dir, status)
    return run_dir, status


def batch_of(sources: dict) -> Batch:
    """One catch-up read: every line of rank 0, then every line of rank 1 (as the tail engine reads ended files)."""
    return Batch([Line(source, text, i, 0, T0 + 100) for source, texts in sources.items()
                  for i, text in enumerate(texts)], {})


def test_the_feed_puts_an_ended_runs_lines_in_time_order_and_a_live_runs_as_read(tmp_path):
    run_dir, status = ended_run(tmp_path)
    sources = {("n", 0): R0, ("n", 1): R1}
    ended = FeedState(clocks=run_clocks(run_dir))
    ended.on_status(status)
    ended.on_batch(batch_of(sources))
    want = [f"[n:{rank}] {sources[('n', rank)][i]}" for rank, i in EXPECTED]
    assert ended.store.view(None) == want and ended.take().lines == want
    status.state = "running"
    live = FeedState(clocks=run_clocks(run_dir))
    live.on_status(status)
    live.on_batch(batch_of(sources))
    assert live.store.view(None) == [f"[n:{r}] {t}" for r in (0, 1) for t in sources[("n", r)]]


def test_at_scale_a_sample_of_ranks_is_read_and_the_rest_get_its_median_step_times(tmp_path):
    """4,096 ranks' metrics records took the whole of the TUI's open: at most ``most`` ranks are read, spread
    over the ranks, and every other rank gets each step's median time among them."""
    run_dir, _ = ended_run(tmp_path)
    for rank, late in ((2, 0.2), (3, 7.0)):  # rank 3's records are its own: read only when it is sampled
        (run_dir / "logs" / f"rank-{rank}.n.log").write_text("[cockpit] step=10 loss=0.5\n")
        with open(run_dir / "metrics" / f"rank-{rank}.jsonl", "w") as f:
            f.writelines(json.dumps({"step": s, "time": T0 + s + late, "loss": 0.5}) + "\n" for s in range(1, 31))
    sources = [("n", r) for r in range(4)]
    sampled = run_clocks(run_dir, most=3)(sources)  # ranks 0, 2 and 3 (first and last included); rank 1 pooled
    assert sampled[("n", 3)].steps[10] == T0 + 17.0 and sampled[("n", 0)].steps[10] == T0 + 10
    assert sampled[("n", 1)].steps[10] == T0 + 10.2  # the median of 10.0, 10.2 and 17.0
    every = run_clocks(run_dir, most=4)(sources)
    assert every[("n", 1)].steps[10] == T0 + 10.1 and every[("n", 1)].end == T0 + 35


# A run that relaunched itself (demo-heal: rank 1 raised after step 12 in attempt 0; attempt 1 started at T0 + 20
# and resumed from step 10). Rank 1 prints no steps, and its repeated "step 12" names attempt 1's record; the
# marker line each attempt writes into every log is what places attempt 0's traceback before attempt 1.
MARK = "[cockpit] attempt 1 (COCKPIT_ATTEMPT=1) of 3 starts: relaunched after a failure of attempt 0 (rank 1 on n)"
H0 = ["[cockpit] start rank=0", "[cockpit] step=10 loss=0.5", "RuntimeError: Connection reset by peer", MARK,
      "[cockpit] start rank=0", "[cockpit] resumed from checkpoints/latest.pt step=10 epoch=0",
      "[cockpit] step=20 loss=0.3", "[cockpit] finish rank=0"]
H1 = ["[cockpit] start rank=1", "[demo] rank 1: injecting failure after step 12 (attempt 0)",
      "Traceback (most recent call last):", "RuntimeError: injected failure", MARK, "[cockpit] start rank=1",
      "[cockpit] finish rank=1"]
HA = ["torchrun: Sending process closing signal SIGTERM", MARK, "torchrun: starting"]


def test_an_attempts_lines_come_before_the_next_attempts_marker_in_every_log():
    """The run view's "all ranks" of a healed run showed rank 1's attempt-0 traceback after the agent's `attempt 1
    starts` line (found on a fresh clone, issue 33's new-user pass)."""
    attempts = {0: T0, 1: T0 + 20}
    # rank 0's step 10 is attempt 0's record (attempt 1 resumed from it), 12 and 20 attempt 1's
    clocks = {("n", 0): SourceClock(T0 + 40, {10: T0 + 10, 12: T0 + 27, 20: T0 + 35}, T0 + 21, attempts),
              ("n", 1): SourceClock(T0 + 40, {12: T0 + 27}, T0 + 21, attempts),
              ("n", "agent"): SourceClock(T0 + 40, {}, None, attempts)}
    logs = {("n", 0): H0, ("n", 1): H1, ("n", "agent"): HA}
    merged = [logs[source][i] for source, i in in_time_order(logs, clocks)]
    marks = [i for i, text in enumerate(merged) if text == MARK]
    assert marks == [8, 9, 10], merged  # the three markers together, after the 8 lines of attempt 0
    assert sorted(merged[:8]) == sorted([*H0[:3], *H1[:4], *HA[:1]])
    assert sorted(merged[11:]) == sorted([*H0[4:], *H1[5:], *HA[2:]])
    times = line_times(H1, clocks[("n", 1)])
    assert times == sorted(times) and times[4] == T0 + 20 and max(times[:4]) < T0 + 20


def test_the_feed_reads_when_each_attempt_started(tmp_path):
    from cockpit.run.attempts import Attempt

    run_dir, status = ended_run(tmp_path)
    status.attempts = [Attempt(0, T0, ended=T0 + 19, end="failure"), Attempt(1, T0 + 20, ended=T0 + 41,
                                                                              end="succeeded")]
    write_status(run_dir, status)
    assert run_clocks(run_dir)([("n", 1)])[("n", 1)].attempts == {0: T0, 1: T0 + 20}
