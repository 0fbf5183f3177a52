"""The supervisor's watch at scale (issue 32): logs/ listed again only when it changed (cockpit.hang.rankdir), and
a large run read whole every few seconds with a few sentinel ranks probed between (Monitor.probe, the watchdog's
cadence). Real files in a run directory; progress verdicts with plain numbers."""

from __future__ import annotations

import os
import time

from cockpit.hang.progress import Monitor, RankSample
from cockpit.hang.rankdir import RankDir
from cockpit.hang.watchdog import SENTINELS, WHOLE_MAX_S, WHOLE_RANKS, sentinels, straggler_window, whole_every
from cockpit.run.progress import RankProgress


def _old(logs) -> None:
    """The directory's mtime a minute back: a listing taken now is taken well after it (no clock tick shared)."""
    back = time.time() - 60
    os.utime(logs, (back, back))


def _logs(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for rank in range(4):
        (logs / f"rank-{rank}.n0.log").write_text("step 1\n")
    _old(logs)
    return logs


def test_logs_is_listed_once_while_it_is_unchanged_and_again_when_a_file_comes(tmp_path):
    logs = _logs(tmp_path)
    d = RankDir(tmp_path)
    first = d.names(("log", "exit"))
    assert sorted(first["log"]) == [0, 1, 2, 3] and first["exit"] == {} and d.listings == 1
    with open(logs / "rank-0.n0.log", "a") as f:
        f.write("step 2\n")  # appended to: the directory is unchanged
    assert d.names(("log", "exit")) == first and d.exits() == {} and d.listings == 1
    (logs / "rank-2.n0.exit").write_text("0 1700000000.5\n")  # created: the directory changed
    assert d.exits()[2].status == 0 and d.listings == 2


def test_an_exit_record_caught_half_written_is_read_again_until_whole(tmp_path):
    logs = _logs(tmp_path)
    record = logs / "rank-1.n0.exit"
    record.write_text("1 1700000000")  # no newline yet: the stream has copied part of it
    _old(logs)
    d = RankDir(tmp_path)
    assert d.exits()[1].time == 1700000000.0
    with open(record, "a") as f:
        f.write(".25\n")  # the rest: the directory does not change
    assert d.exits()[1].time == 1700000000.25 and d.listings == 1
    assert d.exits(frozenset({"n0"})) == {}  # a host left out (recover:): its records do not count


def test_a_listing_taken_in_the_tick_of_a_change_is_not_trusted(tmp_path):
    logs = _logs(tmp_path)
    os.utime(logs)  # changed just now: a change in the same clock tick would not move the mtime
    d = RankDir(tmp_path)
    d.names(("log",))
    d.names(("log",))
    assert d.listings == 2  # listed again until a listing is taken well after the mtime it saw


def _sample(rank, size, n, step=None):
    return RankSample(rank, "n0", size, None, step, "running", {"t": 0.0, "sync": 0.0, "n": n})


def test_a_probe_that_sees_progress_restarts_the_quiet_clock_and_it_is_counted_once():
    m = Monitor(stall_after=10)
    m.look(0.0, [_sample(r, 10, 1) for r in range(4)])  # every rank has done a collective: running
    assert m.probe(5.0, [_sample(0, 20, 2)])  # rank 0 moved on
    v = m.look(9.0, [_sample(0, 20, 2), *(_sample(r, 10, 1) for r in range(1, 4))])
    assert v.quiet == 4.0 and not v.stalled  # the probe's progress, not counted again by the whole look
    assert not m.probe(14.0, [_sample(0, 20, 2)])  # no progress since: the whole look decides
    assert m.look(15.0, [_sample(0, 20, 2), *(_sample(r, 10, 1) for r in range(1, 4))]).stalled


def test_a_probe_tells_nothing_before_the_run_started_or_of_a_rank_never_looked_at():
    m = Monitor(stall_after=10)
    assert not m.probe(1.0, [_sample(0, 10, 0)])  # no look yet
    m.look(2.0, [_sample(0, 10, 0)])  # starting: nothing completed
    assert not m.probe(3.0, [_sample(0, 20, 0)])
    m.look(4.0, [_sample(0, 20, 1)])
    assert not m.probe(5.0, [_sample(7, 20, 5)])


def test_a_large_run_is_read_whole_less_often_and_probed_at_sentinels_spread_over_it():
    assert whole_every(8) == whole_every(WHOLE_RANKS) == 1.0 and whole_every(4 * WHOLE_RANKS) == 4.0
    from cockpit.hang.progress import Verdict

    small = Verdict(ranks={r: RankProgress("n0", "running") for r in range(WHOLE_RANKS)})
    assert sentinels(small) == ()  # read whole every second: no probe
    ranks = {r: RankProgress(f"n{r // 8}", "exited" if r < 8 else "running") for r in range(4096)}
    found = sentinels(Verdict(ranks=ranks))
    assert len(found) == SENTINELS and min(found) == 8  # live ranks only
    assert len({r // 8 for r in found}) == SENTINELS  # each on a node of its own


def test_the_looks_of_a_very_large_run_stay_close_enough_for_its_rates_and_wait_shares():
    assert whole_every(100_000) == WHOLE_MAX_S < Monitor(None).window  # two whole looks in the 10 s of a rate


def _straggler_run(every: float, window: float) -> int | None:
    """8 ranks stepping once a second, looked at whole every ``every`` s; rank 5 waits 2% of its time, the others
    60%: the rank named, with the straggler rule judging ``window`` s."""
    m = Monitor(600)
    m.rule.window = window
    for k in range(30):
        now = 1000.0 + k * every
        looked = [RankSample(r, "n0", 100 + k, now, int(k * every), "running",
                             {"t": now, "sync": (0.02 if r == 5 else 0.6) * (now - 1000.0), "n": int(k * every)})
                  for r in range(8)]
        if (found := m.look(now, looked).straggler) is not None:
            return found.rank
    return None


def test_a_straggler_among_4096_ranks_is_named_though_they_are_looked_at_whole_every_few_seconds():
    every = whole_every(4096)
    assert every > 10 / 3  # the 10 s window holds fewer than the rule's three intervals
    assert _straggler_run(every, 10.0) is None  # as it was: never named above 3,400 ranks
    assert straggler_window(10.0, 4096) > 10.0 and _straggler_run(every, straggler_window(10.0, 4096)) == 5
    assert straggler_window(10.0, 8) == 10.0  # a run looked at whole each second keeps its 10 s window


def test_a_beat_unchanged_since_its_last_read_is_not_read_again_and_a_changed_one_is(tmp_path):
    from cockpit.hang.gather import last_json_line

    beat = tmp_path / "rank-0.n0.beat"
    beat.write_text('{"t": 1.0, "n": 1}\n')
    kept: dict = {}
    first = last_json_line(beat, kept)
    assert first == {"t": 1.0, "n": 1} and str(beat) in kept
    kept[str(beat)] = (kept[str(beat)][0], {"kept": True})  # what a read would give is now told apart
    assert last_json_line(beat, kept) == {"kept": True}  # same inode, size and mtime: not read
    with open(beat, "a") as f:
        f.write('{"t": 2.0, "n": 2}\n')
    assert last_json_line(beat, kept) == {"t": 2.0, "n": 2}  # grown: read again
    beat.unlink()
    assert last_json_line(beat, kept) is None and str(beat) not in kept


def test_a_kept_pid_is_read_again_when_its_process_ended_or_the_pid_is_another_process_now(tmp_path):
    import subprocess
    import sys

    from cockpit.hang.gather import _pid

    d = RankDir(tmp_path)
    pidfile = tmp_path / "rank-0.n0.pid"
    pidfile.write_text(f"{os.getpid()}\n")
    assert _pid(str(pidfile), d, {}) == os.getpid() and d.pids[str(pidfile)][0] == os.getpid()
    pidfile.write_text("1\n")  # not read again while the process it named lives on
    assert _pid(str(pidfile), d, {}) == os.getpid()
    d.pids[str(pidfile)] = (os.getpid(), b"0")  # the pid is another process's now (another start time)
    assert _pid(str(pidfile), d, {}) == 1
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    pidfile.write_text(f"{child.pid}\n")
    d.pids[str(pidfile)] = (child.pid, None)
    states: dict = {}
    assert _pid(str(pidfile), d, states) == child.pid and states[child.pid][0] == "exited"


def test_a_local_run_s_progress_is_dated_by_its_log_s_mtime_within_the_span_since_it_was_read():
    def sample(rank: int, size: int, mtime: float) -> RankSample:
        return RankSample(rank, "n0", log_size=size, log_mtime=mtime, step=size)

    dated, plain = Monitor(30.0, dated=True), Monitor(30.0)
    for m in (dated, plain):
        m.look(100.0, [sample(0, 10, 99.0), sample(1, 10, 99.0)])
        m.look(101.0, [sample(0, 20, 100.5), sample(1, 20, 100.5)])  # started
    # read again 4 s later (a whole look of a large run): rank 1's last step came at 102, rank 0's at 101.5
    assert dated.look(105.0, [sample(0, 30, 101.5), sample(1, 30, 102.0)]).quiet == 3.0
    assert plain.look(105.0, [sample(0, 30, 101.5), sample(1, 30, 102.0)]).quiet == 0.0
    # a file time before the last read (another clock, a coarse one) counts from that read; one after now, as now
    assert dated.look(109.0, [sample(0, 40, 50.0), sample(1, 40, 50.0)]).quiet == 4.0
    assert dated.look(110.0, [sample(0, 50, 500.0), sample(1, 50, 500.0)]).quiet == 0.0


def test_a_rank_that_printed_then_completed_a_collective_is_dated_by_its_beat_and_a_probe_dates_alike():
    def sample(rank: int, size: int, mtime: float, n: int, t: float) -> RankSample:
        return RankSample(rank, "n0", log_size=size, log_mtime=mtime, beat={"t": t, "n": n})

    m = Monitor(30.0, dated=True)
    m.look(100.0, [sample(0, 10, 99.0, 1, 99.5), sample(1, 10, 99.0, 1, 99.5)])
    m.look(101.0, [sample(0, 20, 100.2, 2, 100.4), sample(1, 20, 100.2, 2, 100.4)])  # started
    # rank 1 printed at 101.5 and its beat of 102.5 counts a collective more: the beat's time, not the print's
    assert m.look(105.0, [sample(0, 20, 100.2, 2, 104.5), sample(1, 30, 101.5, 3, 102.5)]).quiet == 2.5
    # a collective counted alone is dated by its beat; a beat that counts nothing new dates nothing
    assert m.probe(106.0, [sample(0, 20, 100.2, 3, 105.8)]) and m.last_progress == 105.8
    assert not m.probe(107.0, [sample(0, 20, 100.2, 3, 106.9)]) and m.last_progress == 105.8


def test_a_step_seen_after_its_line_is_dated_by_its_metrics_record_not_by_the_look_that_saw_it():
    def sample(size: int, mtime: float, step: int, t: float | None) -> RankSample:
        return RankSample(0, "n0", log_size=size, log_mtime=mtime, step=step, step_time=t)

    m = Monitor(30.0, dated=True)
    m.look(100.0, [sample(10, 99.0, 1, 99.0)])
    m.look(101.0, [sample(20, 101.1, 1, 99.0)])  # its line read, its metrics record not written yet
    assert m.look(102.5, [sample(20, 101.1, 2, 101.25)]).quiet == 1.25  # the step alone: its record's time
    assert m.look(104.0, [sample(20, 101.1, 3, None)]).quiet == 0.0  # a record that says no time: the look's
