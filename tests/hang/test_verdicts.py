"""cockpit.hang's pure parts: progress verdicts with plain numbers, and real faulthandler dumps and Flight
Recorder traces (tests/fixtures/hang: recorded on this machine from a 2-rank gloo run, torch 2.13.0 CPU,
rank 1 stuck in load_batch before its 4th all_reduce, rank 0 waiting in it)."""

from __future__ import annotations

from pathlib import Path

from cockpit.hang.evidence import Evidence
from cockpit.hang.finding import hang_finding, stacks_report, straggler_finding
from cockpit.hang.progress import Monitor, RankSample
from cockpit.hang.stacks import last_dump, parse_dump, parse_flight_record
from cockpit.run.progress import RankProgress as P

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "hang"


def beat(t, sync, n, inside=None, since=None):
    return {"t": t, "sync": sync, "n": n, "in": inside, "since": since}


def look(m: Monitor, now: float, sizes, states=("running", "running"), beats=(None, None), steps=(None, None)):
    return m.look(now, [RankSample(r, "vm", sizes[r], now, steps[r], states[r], beats[r]) for r in range(len(sizes))])


def test_a_quiet_start_shorter_than_stall_after_is_never_a_stall():
    m = Monitor(stall_after=10)
    assert not look(m, 100.0, (0, 0)).stalled
    assert not look(m, 109.0, (0, 0)).stalled  # 9 s of silence: model load, compile...
    v = look(m, 109.5, (120, 0))  # first output
    assert not v.stalled and v.quiet == 0
    assert not look(m, 119.0, (120, 0)).stalled


def test_no_progress_for_stall_after_is_a_stall_and_progress_clears_it():
    m = Monitor(stall_after=10)
    look(m, 0.0, (50, 50))
    assert not look(m, 9.9, (50, 50)).stalled
    v = look(m, 10.0, (50, 50))
    assert v.stalled and v.quiet == 10.0 and {r.flag for r in v.ranks.values()} == {"stalled"}
    assert not look(m, 11.0, (50, 60)).stalled  # one rank wrote a line


def test_a_new_step_counts_as_progress_even_without_output():
    m = Monitor(stall_after=5)
    look(m, 0.0, (10, 10), steps=(1, 1))
    assert not look(m, 6.0, (10, 10), steps=(2, 2)).stalled
    assert look(m, 11.0, (10, 10), steps=(2, 2)).stalled


def test_zero_turns_stall_detection_off_and_exited_ranks_never_stall():
    m = Monitor(stall_after=0)
    look(m, 0.0, (5, 5))
    assert not look(m, 1e6, (5, 5)).stalled
    m = Monitor(stall_after=5)
    look(m, 0.0, (5, 5), states=("exited", "exited"))
    assert not look(m, 100.0, (5, 5), states=("exited", "exited")).stalled


def test_a_stopped_rank_is_reported_at_once_and_a_silent_beat_reads_as_not_responding():
    m = Monitor(stall_after=600)
    v = look(m, 0.0, (5, 5), states=("running", "stopped"))
    assert v.stopped == (1,) and v.ranks[1].flag == "stopped" and not v.stalled
    m = Monitor(stall_after=600, beat_timeout=10)
    v = look(m, 100.0, (5, 5), states=(None, None), beats=(beat(99.0, 0, 1), beat(80.0, 0, 1)))
    assert v.stopped == (1,) and v.ranks[1].state == "not responding"


def _beats(t, waits, calls):
    return tuple(beat(t, w, calls) for w in waits)


def test_the_rank_that_waits_least_while_the_others_wait_is_named_after_confirm_looks_and_not_before():
    m = Monitor(stall_after=600, window=10, confirm=3)
    named = []
    for i in range(12):
        t = float(i)  # 10 steps/s: rank 1 works 99 ms a step, rank 0 10 ms and waits 90 ms in all_reduce
        v = look(m, t, (i, i), beats=_beats(t, (0.9 * i, 0.01 * i), 10 * i))
        named.append(v.straggler.rank if v.straggler else None)
    first = named.index(1)
    assert first == 7 and named[:7] == [None] * 7  # it judges once 5 s (half a window) are seen; 3 looks confirm
    assert set(named[first:]) == {1}
    s = v.straggler
    assert s.host == "vm" and 98 <= s.compute_ms <= 100 and 89 <= s.others_wait_ms <= 91
    assert v.ranks[1].flag == "straggler" and v.ranks[0].wait > 0.8


def test_ranks_that_stop_syncing_are_a_hang_in_the_making_not_a_straggler():
    """The first seconds of a hang look like an extreme straggler: rank 1 stuck, rank 0 waiting ever longer."""
    m = Monitor(stall_after=600, window=10, confirm=3)
    for i in range(30):
        t = float(i)
        n = min(10 * i, 100)  # balanced at 10 syncs a second for 10 s, then rank 1 got stuck at t=10
        waits = (0.2 * i if i <= 10 else 2.0 + (t - 10), 0.2 * min(i, 10))
        v = look(m, t, (i, i), beats=(beat(t, waits[0], n), beat(t, waits[1], n)))
        assert v.straggler is None, (i, v.straggler)


def test_balanced_ranks_are_never_named_and_a_named_straggler_does_not_flap():
    m = Monitor(stall_after=600, window=10, confirm=3)
    for i in range(20):  # both wait 30 % of their time: balanced
        v = look(m, float(i), (i, i), beats=_beats(float(i), (0.3 * i, 0.3 * i), 10 * i))
        assert v.straggler is None
    m = Monitor(stall_after=600, window=4, confirm=3)
    flags = []
    for i in range(40):  # imbalanced for 20 s, then balanced; one balanced look in the middle
        balanced = i >= 20 or i == 12
        w0 = 0.5 * i if not balanced else (m.ranks[0].beats.points[-1][1] + 0.05 if i else 0)
        w1 = (m.ranks[1].beats.points[-1][1] if i else 0) + (0.05 if balanced else 0.001)
        v = look(m, float(i), (i, i), beats=_beats(float(i), (w0, w1), 10 * i))
        flags.append(v.straggler is not None)
    flips = sum(1 for a, b in zip(flags, flags[1:], strict=False) if a != b)
    assert flips == 2, flags  # on once (confirmed), off once (confirmed); the lone balanced look changed nothing


def test_faulthandler_dumps_read_as_culprit_and_victim():
    victim = parse_dump(last_dump((FIX / "victim.stacks").read_text()))
    culprit = parse_dump(last_dump((FIX / "culprit.stacks").read_text()))
    assert victim.collective == "all_reduce" and victim.user_frame.where() == "<module> (hang.py:10)"
    assert culprit.collective is None and culprit.user_frame.where() == "load_batch (hang.py:6)"
    assert len(culprit.threads) == 2 and culprit.main.current  # the hook's beat thread is not the main one


def test_flight_recorder_dumps_show_who_never_enqueued_the_collective():
    v = parse_flight_record((FIX / "victim.fr.json").read_text())
    c = parse_flight_record((FIX / "culprit.fr.json").read_text())
    assert (v.enqueued, v.completed, v.op) == (4, 3, "gloo:all_reduce")
    assert (c.enqueued, c.completed) == (3, 3)
    assert parse_flight_record("not json") is None and parse_flight_record("[]") is None


def test_the_finding_names_the_culprit_where_it_is_and_the_collective_the_victim_waits_in():
    evidence = {0: Evidence(0, "vm", last_dump((FIX / "victim.stacks").read_text()),
                            parse_flight_record((FIX / "victim.fr.json").read_text()),
                            {"in": "all_reduce", "since": 100.0}),
                1: Evidence(1, "vm", last_dump((FIX / "culprit.stacks").read_text()),
                            parse_flight_record((FIX / "culprit.fr.json").read_text()), {"in": None})}
    progress = {0: P("vm", "running"), 1: P("vm", "running")}
    f = hang_finding("stall", 61.0, progress, evidence, now=160.0, run_ref="r1")
    assert [c["rank"] for c in f["culprits"]] == [1] and f["culprits"][0]["where"] == "load_batch (hang.py:6)"
    assert [(v["rank"], v["op"], v["waiting_s"]) for v in f["victims"]] == [(0, "all_reduce", 60.0)]
    assert f["collective"] == {"seq": 4, "op": "gloo:all_reduce"}
    assert f["text"] == ("no rank made progress for 61 s: rank 1 (vm) is stuck in load_batch (hang.py:6), outside "
                         "any collective; rank 0 waits in all_reduce (collective #4, gloo:all_reduce) for 60 s")
    assert f["next"] == "cockpit stacks r1 --rank 1" and f["hint"].startswith("rank 1 is the culprit; the ranks")
    report = stacks_report(evidence)
    assert report.index("-- rank 0 (in all_reduce") < report.index("-- rank 1 (outside any collective, at load_batch")


def test_a_stopped_rank_is_the_culprit_even_without_its_stack():
    progress = {0: P("a", "running", collective="all_reduce", in_since=5.0),
                1: P("b", "stopped")}
    f = hang_finding("stopped", 3.0, progress, {0: Evidence(0, "a", "", None, None),
                                                 1: Evidence(1, "b", "", None, None)}, now=10.0)
    assert f["culprits"][0]["rank"] == 1 and "stopped (SIGSTOP, state T)" in f["text"]
    assert "rank 0 waits in all_reduce for 5 s" in f["text"] and "kill -CONT" in f["hint"]


def test_every_rank_in_a_collective_points_at_mismatched_collectives():
    progress = {0: P("a", "running", collective="all_reduce"),
                1: P("a", "running", collective="barrier")}
    f = hang_finding("stall", 700, progress, {}, now=0.0, pg_backend="gloo")
    assert not f["culprits"] and f["mismatch"] and "called different collectives" in f["hint"]
    assert "the ranks wait in different collectives: rank 0 in all_reduce, rank 1 in barrier" in f["text"]
    # the advice is what cockpit itself shows; TORCH_DISTRIBUTED_DEBUG=DETAIL segfaults DDP on torch 2.13's CPU build
    assert "cockpit stacks shows every rank's op" in f["hint"] and "DETAIL" not in f["hint"]
    assert "NCCL_DEBUG" not in f["hint"] and f["next"] == "cockpit stacks RUN"


def test_the_collective_named_is_the_first_one_a_culprit_never_enqueued():
    """DDP keeps two buckets in flight: the victim enqueued #21 while the culprit stopped after #19."""
    from cockpit.hang.stacks import FlightRecord

    progress = {0: P("a", "running", collective="backward"), 1: P("a", "running")}
    evidence = {0: Evidence(0, "a", "", FlightRecord(21, 19, "gloo:allreduce"), {"in": "backward"}),
                1: Evidence(1, "a", "", FlightRecord(19, 19, "gloo:allreduce"), {"in": None})}
    f = hang_finding("stall", 30, progress, evidence, now=0.0)
    assert f["collective"]["seq"] == 20 and [c["rank"] for c in f["culprits"]] == [1]


def test_several_culprits_and_no_victims_read_right():
    progress = {0: P("a", "running"), 1: P("a", "running")}
    stack = last_dump((FIX / "culprit.stacks").read_text())
    f = hang_finding("stall", 16, progress, {0: Evidence(0, "a", stack, None, {}),
                                              1: Evidence(1, "a", stack, None, {})}, now=0.0)
    assert f["hint"] == "ranks 0, 1 are the culprits" and "victim" not in f["text"]


def test_without_the_hook_the_hint_says_so():
    progress = {0: P("a", "running"), 1: P("a", "running")}
    f = hang_finding("stall", 16, progress, {0: Evidence(0, "a", "", None, None),
                                              1: Evidence(1, "a", "", None, None)}, now=0.0)
    assert "ranks 0, 1 gave no stacks" in f["text"] and "COCKPIT_HOOK=0" in f["hint"] and f["next"] is None


def test_straggler_finding_words():
    from cockpit.hang.progress import Straggler

    f = straggler_finding(Straggler(3, "gpu2", 52.4, 48.0, 0.02, 0.47))
    assert f["kind"] == "straggler" and f["rank"] == 3 and f["severity"] == "warning"
    assert f["text"].startswith("rank 3 (gpu2) is a straggler: 52 ms of its own work per step while the other "
                                "ranks wait 48 ms per step for it")
