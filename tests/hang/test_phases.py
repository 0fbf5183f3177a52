"""cockpit.hang.progress with plain numbers: the start phase and its own budget, the adaptive stall threshold,
pauses that are not straggling, and the straggler named on rank 0, a middle rank and the last (so a rule
that names the highest rank, or the lowest, fails)."""

from __future__ import annotations

import pytest

from cockpit.hang.progress import Monitor, RankSample
from cockpit.run.progress import RankProgress as P


def beat(t: float, n: int, sync: float = 0.0, inside: str | None = None, since: float | None = None) -> dict:
    return {"t": t, "sync": sync, "n": n, "in": inside, "since": since}


def look(m: Monitor, now: float, beats: list[dict | None], sizes: list[int] | None = None, steps=None):
    sizes = sizes or [0] * len(beats)
    steps = steps or [None] * len(beats)
    return m.look(now, [RankSample(r, "vm", sizes[r], now, steps[r], "running", beats[r]) for r in range(len(beats))])


def test_a_start_longer_than_stall_after_is_starting_with_its_own_budget_not_a_stall():
    """Every rank imports and loads for 40 s (beats, no collective yet): starting, never stalled before
    start_after; slow_start says where once the quiet passes stall_after."""
    m = Monitor(stall_after=5, start_after=60)
    for t in range(0, 60):
        v = look(m, float(t), [beat(t, 0), beat(t, 0)])
        assert v.phase == "starting" and not v.stalled and v.rule == "start_after" and v.threshold == 60
        assert v.slow_start == (t >= 5)
    assert look(m, 60.0, [beat(60, 0), beat(60, 0)]).stalled  # the start's own budget is used up


def test_a_rank_waiting_in_init_process_group_keeps_the_run_starting():
    """init_process_group is timed, not counted: a beat "in" it with n 0 is still the start."""
    m = Monitor(stall_after=3, start_after=30)
    for t in range(20):
        v = look(m, float(t), [beat(t, 0, inside="init_process_group", since=0.0), beat(t, 0)])
        assert v.phase == "starting" and not v.stalled


@pytest.mark.parametrize("first", ["collective", "step"])
def test_the_start_ends_with_the_first_completed_collective_or_step(first):
    m = Monitor(stall_after=5, start_after=600)
    look(m, 0.0, [beat(0, 0), beat(0, 0)])
    n, steps = (1, None) if first == "collective" else (0, [1, None])
    v = look(m, 1.0, [beat(1, n), beat(1, 0)], steps=steps)
    assert v.phase == "running" and v.rule == "stall_after" and v.threshold == 5
    assert not look(m, 5.9, [beat(5.9, n), beat(5.9, 0)], steps=steps).stalled
    assert look(m, 6.0, [beat(6, n), beat(6, 0)], steps=steps).stalled


def test_a_rank_without_the_hook_starts_the_run_with_its_first_output():
    m = Monitor(stall_after=5, start_after=600)
    assert look(m, 0.0, [None, None], sizes=[0, 0]).phase == "starting"
    assert look(m, 1.0, [None, None], sizes=[10, 0]).phase == "running"
    m = Monitor(stall_after=5, start_after=600)  # with a beat, output alone does not end the start
    look(m, 0.0, [beat(0, 0), beat(0, 0)], sizes=[0, 0])
    assert look(m, 1.0, [beat(1, 0), beat(1, 0)], sizes=[10, 0]).phase == "starting"


def _steady(m: Monitor, t0: int, t1: int, n0: int) -> int:
    """Both ranks complete a collective every second from t0 to t1; returns the count reached."""
    n = n0
    for t in range(t0, t1):
        n += 1
        v = look(m, float(t), [beat(t, n), beat(t, n)])
        assert not v.stalled, t
    return n


def test_without_stall_after_the_threshold_is_60_s_then_3_times_the_longest_pause():
    m = Monitor(stall_after=None)
    n = _steady(m, 0, 10, 0)
    v = look(m, 10.0, [beat(10, n), beat(10, n)])
    assert v.rule == "adaptive" and v.threshold == 60
    for t in range(11, 51):  # a 40 s evaluation pause: shorter than the floor, no stall
        assert not look(m, float(t), [beat(t, n), beat(t, n)]).stalled
    n = _steady(m, 51, 60, n)  # it ended: the run has shown a 42 s gap (the last collective at 9, the next at 51)
    v = look(m, 60.0, [beat(60, n), beat(60, n)])
    assert v.longest_gap == 42 and v.threshold == 126
    for t in range(61, 185):  # the next pause may be 3x as long (quiet since 59)
        assert not look(m, float(t), [beat(t, n), beat(t, n)]).stalled, t
    assert look(m, 185.0, [beat(185, n), beat(185, n)]).stalled


def test_an_explicit_stall_after_wins_over_the_runs_pauses():
    m = Monitor(stall_after=10)
    n = _steady(m, 0, 5, 0)
    for t in range(5, 40):
        look(m, float(t), [beat(t, n), beat(t, n)])  # a 36 s pause (4 to 40), a stall after 10
    n = _steady(m, 40, 45, n)
    v = look(m, 45.0, [beat(45, n), beat(45, n)])
    assert v.rule == "stall_after" and v.threshold == 10 and v.longest_gap == 36


def test_the_starts_silence_does_not_raise_the_threshold():
    m = Monitor(stall_after=None, start_after=600)
    for t in range(0, 300):  # a 5-minute silent load
        look(m, float(t), [beat(t, 0), beat(t, 0)])
    _steady(m, 300, 310, 0)
    v = look(m, 310.0, [beat(310, 10), beat(310, 10)])
    assert v.phase == "running" and v.threshold == 60 and v.longest_gap <= 1


def test_zero_turns_the_start_budget_off_too():
    m = Monitor(stall_after=0, start_after=60)
    v = look(m, 0.0, [beat(0, 0)])
    v = look(m, 1e5, [beat(1e5, 0)])
    assert v.threshold is None and not v.stalled and not v.slow_start


# -- stragglers ---------------------------------------------------------------------------------------------

def _straggling(m: Monitor, slow: int, ranks: int, t0: int, t1: int, state: dict, own_ms: float = 72.0,
                fast_ms: float = 22.0) -> list:
    """Every rank syncs 10 times a second; ``slow`` works ``own_ms`` per step and hardly waits, the others work
    ``fast_ms`` and wait the difference. Returns the straggler named at each look."""
    named = []
    for t in range(t0, t1):
        beats = []
        for r in range(ranks):
            state.setdefault(r, [0, 0.0])
            steps = 10
            wait = 0.001 if r == slow else (own_ms - fast_ms) / 1000
            state[r][0] += steps
            state[r][1] += steps * wait
            beats.append(beat(t, state[r][0], sync=state[r][1]))
        v = look(m, float(t), beats)
        named.append(v.straggler.rank if v.straggler else None)
    return named


@pytest.mark.parametrize(("ranks", "slow"), [(2, 0), (3, 1), (3, 0), (3, 2)])
def test_the_straggler_is_the_rank_that_waits_least_whichever_its_number(ranks, slow):
    m = Monitor(stall_after=600, window=10, confirm=3)
    named = _straggling(m, slow, ranks, 0, 20, {})
    assert named[-1] == slow and set(named) <= {None, slow}, named


def test_the_figures_come_from_after_the_start_so_the_first_report_is_the_last():
    """A 20 s start without collectives, then rank 0 works 72 ms a step: the first figure named is 72 ms, not
    the start's silence spread over the steps (issue: live 156 ms, post-run 72 ms)."""
    m = Monitor(stall_after=600, window=10, confirm=3)
    for t in range(20):
        look(m, float(t), [beat(t, 0), beat(t, 0)])
    state: dict = {}
    figures = []
    for t in range(20, 45):
        _straggling(m, 0, 2, t, t + 1, state)
        s = m.rule.named
        if s is not None:
            figures.append(round(s.compute_ms))
    assert figures and all(abs(f - 100) <= 2 for f in figures), figures  # 10 syncs/s: 100 ms a sync, 1 ms waited


def test_a_rank_0_evaluation_pause_is_not_straggling_after_it_ends():
    """Rank 0 evaluates 60 s while rank 1 waits in backward; then both step evenly: no straggler, ever."""
    m = Monitor(stall_after=None, window=10, confirm=3)
    n, w1 = 0, 0.0
    for t in range(0, 20):
        n += 10
        assert look(m, float(t), [beat(t, n, 0.3 * t), beat(t, n, 0.3 * t)]).straggler is None
    for t in range(20, 80):  # rank 0 in evaluate (outside), rank 1 inside backward since t=20
        v = look(m, float(t), [beat(t, n, 6.0), beat(t, n, 6.0, inside="backward", since=20.0)])
        assert v.straggler is None
    w1 = 6.0 + 60.0
    for t in range(80, 120):
        n += 10
        v = look(m, float(t), [beat(t, n, 6.0 + 0.3 * (t - 80)), beat(t, n, w1 + 0.3 * (t - 80))])
        assert v.straggler is None, (t, v.straggler)
        assert not v.stalled


def test_a_short_pause_inside_the_window_is_not_straggling_either():
    """Rank 0 works alone for 2 s (too short to count as a pause: one beat without a new sync) while rank 1
    waits, inside even stepping: rank 1 waited 24% of that window, rank 0 3%; per interval it is a blip."""
    m = Monitor(stall_after=None, window=10, confirm=3)
    n, w = [0, 0], [0.0, 0.0]
    for t in range(0, 40):
        if t in (21, 22, 23):  # the pause: 20.5 .. 22.5
            n = [n[0] + (5 if t != 22 else 0)] * 2
            w = [w[0] + 0.02, w[1] + (0.5 if t != 22 else 1.0)]
        else:
            n = [n[0] + 10] * 2
            w = [w[0] + 0.03, w[1] + 0.05]
        v = look(m, float(t), [beat(t, n[0], w[0]), beat(t, n[1], w[1])])
        assert v.straggler is None, (t, v.straggler)


@pytest.mark.parametrize("recorded", ["eval_pauses_a", "eval_pauses_b"])
def test_recorded_beats_of_a_healthy_run_with_two_short_evaluations_name_no_straggler(recorded):
    """Real beats (tests/fixtures/hang/README.md), looked at once a second as the watchdog does, at four
    phases of the second."""
    import json
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "fixtures" / "hang" / recorded
    beats = {r: [json.loads(x) for x in (folder / f"rank-{r}.vm.beat").read_text().splitlines()] for r in (0, 1)}
    first, last = min(b[0]["t"] for b in beats.values()), max(b[-1]["t"] for b in beats.values())
    looks = 0
    for offset in (0.0, 0.25, 0.5, 0.75):
        m = Monitor(stall_after=6)
        t = first + offset
        while t <= last + 1:
            seen = {r: [x for x in b if x["t"] <= t] for r, b in beats.items()}
            v = look(m, t, [seen[r][-1] if seen[r] else None for r in (0, 1)])
            assert v.straggler is None and not v.stalled, (offset, t - first, v.straggler)
            looks += 1
            t += 1.0
    assert looks > 4 * 20  # the whole run (25 s of beats) was looked at


def test_the_straggler_is_judged_on_uninterrupted_stepping_only():
    """Rank 0 works alone 2 s out of every 4 (rank 1 waits through it): each stretch of stepping between two
    pauses is shorter than half the window, so no verdict, whatever the shares; once the pauses stop and
    rank 0 is simply slower at every step, it is named."""
    m = Monitor(stall_after=None, window=10, confirm=3)
    n, w0, w1 = 0, 0.0, 0.0
    for t in range(0, 40):  # a pause from x.5 to x+2.5 every 4 s: one beat without a collective, two halves
        phase = t % 4
        n += {0: 10, 1: 5, 2: 0, 3: 5}[phase]
        w0 += 0.02 if phase != 2 else 0.0
        w1 += {0: 0.05, 1: 0.5, 2: 1.0, 3: 0.5}[phase]
        v = look(m, float(t), [beat(t, n, w0), beat(t, n, w1)])
        assert v.straggler is None, (t, v.straggler)
    named = _straggling(m, 0, 2, 40, 60, {0: [n, w0], 1: [n, w1]})
    assert named[-1] == 0


def test_a_rank_inside_a_collective_but_behind_the_others_in_the_flight_recorder_is_the_culprit():
    """Rank 1 waits in all_reduce #19 while ranks 0 and 2 enqueued #21: it is behind, the culprit."""
    from cockpit.hang.evidence import Evidence
    from cockpit.hang.finding import hang_finding
    from cockpit.hang.stacks import FlightRecord

    progress = {r: P("a", "running", collective="all_reduce") for r in range(3)}
    evidence = {r: Evidence(r, "a", "", FlightRecord(19 if r == 1 else 21, 18 if r == 1 else 20, "gloo:all_reduce"),
                            {"in": "all_reduce", "since": 1.0}) for r in range(3)}
    f = hang_finding("stall", 30, progress, evidence, now=31.0)
    assert [c["rank"] for c in f["culprits"]] == [1] and [v["rank"] for v in f["victims"]] == [0, 2]
    assert f["collective"]["seq"] == 20 and "rank 1 (a) is in all_reduce behind the others" in f["text"]
