"""Stacks asked before a quiet stretch reaches its threshold (cockpit.hang.early), and the watchdog that uses them
for the stall it finds only while they still hold. The watchdog reads real rank files in a run directory; its
stacks come from the gatherer it is given (here: the recorded dumps of tests/fixtures/hang, rank 1 stuck in
load_batch, rank 0 waiting in all_reduce); the quiet is made by moving its clock's start back, not by waiting."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from cockpit.hang.early import SHARE, Early, marks
from cockpit.hang.evidence import Evidence
from cockpit.hang.progress import Verdict
from cockpit.hang.stacks import last_dump
from cockpit.hang.watchdog import Watchdog
from cockpit.run.progress import RankProgress as P
from cockpit.run.status import RunStatus

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "hang"
DUMPS = {0: last_dump((FIX / "victim.stacks").read_text()), 1: last_dump((FIX / "culprit.stacks").read_text())}


def _verdict(quiet: float, inside: str | None = "all_reduce", threshold: float = 10.0) -> Verdict:
    ranks = {0: P("vm", "running", step=3, collective=inside, in_since=100.0 if inside else None),
             1: P("vm", "running", step=3)}
    return Verdict(ranks=ranks, quiet=quiet, phase="running", threshold=threshold, rule="stall_after")


def _evidence(answered=(0, 1)) -> dict[int, Evidence]:
    return {r: Evidence(r, "vm", DUMPS[r] if r in answered else "", None, {"in": None}) for r in (0, 1)}


def test_the_ask_comes_a_gathering_and_a_look_before_the_threshold_and_never_before_half_of_it():
    e = Early()
    assert e.ask_at(10.0, 8, 1.0) < 10.0 - 1.0 - 1.0  # the first gathering's time guessed: a beat and more
    e.took = 2.0
    assert e.ask_at(10.0, 8, 1.0) == 10.0 - 1.0 - 1.5 * 2.0
    e.took = 30.0
    assert e.ask_at(10.0, 8, 1.0) == SHARE * 10.0
    assert Early().ask_at(600.0, 4096, 1.0) > 590.0  # a long threshold: asked only near it


def test_it_is_due_once_a_quiet_stretch_and_again_in_the_next_one():
    e = Early()
    e.took = 1.0
    assert not e.due(_verdict(5.0), 100.0, 1.0)  # not yet
    assert e.due(_verdict(8.0), 100.0, 1.0)
    e.keep(100.0, marks(_verdict(8.0)), _evidence(), {})
    assert not e.due(_verdict(9.0), 100.0, 1.0)  # asked in this stretch
    assert e.due(_verdict(8.0), 120.0, 1.0) and e.asked is None  # progress since: a new stretch, asked anew
    starting = _verdict(8.0)
    starting.phase = "starting"
    assert not e.due(starting, 120.0, 1.0)  # the start has its own stacks (the watch's "starting")
    assert not e.due(_verdict(8.0, threshold=None), 120.0, 1.0)  # the watch is off
    stopped = _verdict(8.0)
    stopped.stopped = (1,)
    assert not e.due(stopped, 120.0, 1.0)  # a stopped rank is found at once, with stacks gathered then


def test_the_look_comes_when_the_quiet_reaches_the_ask_or_the_threshold_not_at_the_next_whole_second():
    e = Early()
    e.took = 1.0  # asked at 7.5 s of quiet
    assert e.until_due(_verdict(3.0), 1.0) == 1.0  # neither within the second
    assert round(e.until_due(_verdict(7.2), 1.0), 2) == 0.31  # just past the ask's point
    e.keep(100.0, marks(_verdict(7.5)), _evidence(), {})
    assert e.until_due(_verdict(8.6), 1.0) == 1.0 and round(e.until_due(_verdict(9.5), 1.0), 2) == 0.51
    stalled = _verdict(10.5)
    stalled.stalled = True
    assert e.until_due(stalled, 1.0) == 1.0  # stalled already: once a second, as before


def test_the_stacks_hold_only_while_no_rank_moved_and_every_rank_answered():
    def taken(at_ask: Verdict, at_stall: Verdict, since: float = 100.0, answered=(0, 1)):
        e = Early()
        e.keep(100.0, marks(at_ask), _evidence(answered), {})
        return e.take(at_stall, since)

    assert taken(_verdict(8.0), _verdict(10.5)) is not None
    assert taken(_verdict(8.0), _verdict(10.5), since=104.0) is None  # progress since the ask
    assert taken(_verdict(8.0, inside=None), _verdict(10.5)) is None  # rank 0 entered a collective since
    assert taken(_verdict(8.0), _verdict(10.5), answered=(0,)) is None  # rank 1 gave no stack: asked again
    e = Early()
    e.keep(100.0, marks(_verdict(8.0)), _evidence(), {})
    assert e.take(_verdict(10.5), 100.0) is not None and e.take(_verdict(10.5), 100.0) is None  # used once


class Gatherer:
    """The stacks as a run's launcher gives them: the recorded dumps, each request counted."""

    def __init__(self) -> None:
        self.asked: list[set[int]] = []

    def __call__(self, run_dir: Path, status: RunStatus, ranks: set[int]) -> dict[int, Evidence]:
        self.asked.append(set(ranks))
        beats = {r: json.loads((run_dir / "logs" / f"rank-{r}.vm.beat").read_text().splitlines()[-1]) for r in ranks}
        return {r: Evidence(r, "vm", DUMPS[r], None, beats[r]) for r in sorted(ranks)}


def _run(tmp_path: Path) -> tuple[Watchdog, Gatherer]:
    logs = tmp_path / "logs"
    logs.mkdir()
    for r in (0, 1):
        (logs / f"rank-{r}.vm.log").write_text("step 3\n")
        _beat(tmp_path, r, None)
    status = RunStatus("r1", "hang", "local", "job.yaml", ["vm"], 2, state="running", stall_after=10)
    gatherer = Gatherer()
    w = Watchdog(tmp_path, status, gatherer, runs_here=False)
    w.tick()  # the first look: every rank has completed collectives (the run is running)
    return w, gatherer


def _beat(run_dir: Path, rank: int, inside: str | None) -> None:
    with open(run_dir / "logs" / f"rank-{rank}.vm.beat", "a") as f:
        beat = {"t": time.time(), "sync": 0.0, "n": 4, "in": inside, "since": 50.0 if inside else None}
        f.write(json.dumps(beat) + "\n")


def _quiet_for(w: Watchdog, seconds: float) -> None:
    """What ``seconds`` more without progress leave: the quiet clock's start, and the stretch an early ask kept,
    moved that far back; the next look due."""
    assert w.monitor.last_progress is not None
    w.monitor.last_progress -= seconds
    if w.early.asked is not None:
        w.early.asked = replace(w.early.asked, quiet_since=w.early.asked.quiet_since - seconds)
    w.next_look = 0.0


def test_a_stall_found_after_an_early_ask_names_the_culprit_from_it_without_asking_again(tmp_path):
    w, gatherer = _run(tmp_path)
    _beat(tmp_path, 0, "all_reduce")  # rank 0 waits in the collective rank 1 never joins
    _quiet_for(w, 0.0)
    w.tick()
    assert gatherer.asked == []  # no quiet yet
    _quiet_for(w, 8.5)
    w.tick()
    assert gatherer.asked == [{0, 1}] and not w.status.findings  # asked early, nothing found yet
    _quiet_for(w, 2.0)
    w.tick()
    [f] = w.status.findings
    assert gatherer.asked == [{0, 1}]  # the stall's stacks are the early ones
    assert f.kind == "stall" and [c.rank for c in f.culprits] == [1] and [v.rank for v in f.victims] == [0]
    assert f.to_dict()["culprits"][0]["where"] == "load_batch (hang.py:6)"


def test_a_rank_that_moved_after_the_early_ask_has_its_stacks_asked_again_at_the_stall(tmp_path):
    w, gatherer = _run(tmp_path)
    _quiet_for(w, 8.5)
    w.tick()
    assert gatherer.asked == [{0, 1}]
    _beat(tmp_path, 0, "all_reduce")  # entered a collective since: no progress, but not where it was asked
    _quiet_for(w, 2.0)
    w.tick()
    [f] = w.status.findings
    assert gatherer.asked == [{0, 1}, {0, 1}] and f.kind == "stall" and [c.rank for c in f.culprits] == [1]
