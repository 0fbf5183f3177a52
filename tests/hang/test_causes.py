"""cockpit.hang.finding over real dumps (tests/fixtures/hang, see its README): the culprit on rank 0, a middle
rank and the last; a rank in init_process_group is not a culprit; a rank waiting for its DataLoader is named
with its worker's frame; uneven inputs are named with their fix; and the "starting" words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cockpit.hang.evidence import Evidence, workers_of
from cockpit.hang.finding import hang_finding, stacks_report, starting_text
from cockpit.hang.stacks import FlightRecord, parse_dump
from cockpit.run.progress import RankProgress as P

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "hang"


def dump(name: str) -> str:
    return (FIX / name).read_text()


def running(ranks: int) -> dict:
    return {r: P(f"n{r}", "running") for r in range(ranks)}


@pytest.mark.parametrize(("ranks", "stuck"), [(2, 0), (3, 1), (3, 0), (3, 2), (4, 2)])
def test_the_culprit_is_the_rank_outside_the_collective_whichever_its_number(ranks, stuck):
    evidence = {r: Evidence(r, f"n{r}", dump("culprit.stacks" if r == stuck else "victim.stacks"),
                            FlightRecord(3 if r == stuck else 4, 3, "gloo:all_reduce"),
                            {"in": None if r == stuck else "all_reduce", "since": 100.0}) for r in range(ranks)}
    f = hang_finding("stall", 20, running(ranks), evidence, now=120.0)
    assert [c["rank"] for c in f["culprits"]] == [stuck]
    assert sorted(v["rank"] for v in f["victims"]) == [r for r in range(ranks) if r != stuck]
    assert f"rank {stuck} (n{stuck}) is stuck in load_batch (hang.py:6), outside any collective" in f["text"]
    assert f["hint"].startswith(f"rank {stuck} is the culprit") and f["next"].endswith(f"--rank {stuck}")
    assert f["collective"] == {"seq": 4, "op": "gloo:all_reduce"}


@pytest.mark.parametrize("holder", [0, 1])
def test_a_rank_waiting_in_init_process_group_is_not_a_culprit_with_the_one_it_waits_for(holder):
    """deadlock_init.py: the holder of a lock waits in init_process_group, the other blocks on the lock."""
    waiting = parse_dump(dump("init_wait.stacks"))
    assert waiting.collective == "init_process_group" and waiting.user_frame.where() == "<module> (deadlock_init.py:33)"
    other = 1 - holder
    evidence = {holder: Evidence(holder, f"n{holder}", dump("init_wait.stacks"), None,
                                 {"in": "init_process_group", "since": 90.0, "n": 0}),
                other: Evidence(other, f"n{other}", dump("init_lock.stacks"), None, {"in": None, "n": 0})}
    f = hang_finding("stall", 30, running(2), evidence, now=120.0, phase="start")
    assert [c["rank"] for c in f["culprits"]] == [other]
    assert [(v["rank"], v["op"], v["waiting_s"]) for v in f["victims"]] == [(holder, "init_process_group", 30.0)]
    assert f["text"].startswith("no rank made progress for 30 s while starting (none has completed a step or a "
                                "collective yet): ")
    assert f"rank {other} (n{other}) is stuck in prepare_dataset (deadlock_init.py:26)" in f["text"]
    assert f"rank {holder} waits in init_process_group for 30 s" in f["text"]
    assert f["hint"] == (f"rank {other} is the culprit; the ranks in init_process_group wait for it to join the "
                         "process group")


def test_the_starting_words_say_where_each_rank_is_and_who_waits_in_init():
    evidence = {0: Evidence(0, "vm", dump("init_wait.stacks"), None, {"in": "init_process_group"}),
                1: Evidence(1, "vm", dump("init_lock.stacks"), None, {"in": None}),
                2: Evidence(2, "vm", "", None, None)}
    text = starting_text(running(3), evidence, 250.0)
    assert text == ("starting: rank 0 waiting in init_process_group at <module> (deadlock_init.py:33); rank 1 in "
                    "prepare_dataset (deadlock_init.py:26); rank 2 gave no stack yet for 4.2 min")


def test_a_rank_waiting_for_its_dataloader_is_named_with_its_workers_frame_and_source_line():
    record = json.loads(dump("loader.workers.json"))
    workers = workers_of(record, record["req"])
    assert [w.pid for w in workers] == [7783, 7784] and workers_of(record, "another request") == ()
    rank1 = parse_dump(dump("loader_wait.stacks"))
    assert rank1.waits_on_loader and rank1.collective is None
    assert rank1.user_frame.where() == "<module> (loader_hang.py:45)"
    assert workers[0].stack.worker_frame.where() == "__getitem__ (loader_hang.py:34)"
    assert workers[1].stack.worker_frame is None  # idle in torch's worker loop (its older frames are the rank's)
    evidence = {0: Evidence(0, "n0", dump("victim.stacks"), None, {"in": "backward", "since": 100.0}),
                1: Evidence(1, "n1", dump("loader_wait.stacks"), None, {"in": None}, workers)}
    f = hang_finding("stall", 8, running(2), evidence, now=110.0)
    [c] = f["culprits"]
    assert c["rank"] == 1 and c["loader"] and c["idle_workers"] == [7784]
    assert c["workers"] == [{"pid": 7783, "state": "S", "wchan": "wait_for_partner",
                             "where": "__getitem__ (loader_hang.py:34)",
                             "code": 'with open(self.fifo, "rb") as f:  # blocks: nobody opens the other end'}]
    assert ("rank 1 (n1) waits for its DataLoader at <module> (loader_hang.py:45), outside any collective: its "
            "worker pid 7783 is stuck in __getitem__ (loader_hang.py:34): with open(self.fifo, \"rb\")") in f["text"]
    assert "its DataLoader worker does not return from the job's own code" in f["hint"]
    report = stacks_report(evidence)
    assert "-- worker pid 7783 of rank 1 (state S, kernel wait wait_for_partner; in __getitem__ (loader_hang.py:34))" \
        in report and "-- worker pid 7784 of rank 1 (state S" in report and "idle in torch's worker loop" in report


def test_a_worker_blocked_in_the_kernel_says_so_and_without_worker_stacks_the_rank_says_that():
    record = json.loads(dump("loader.workers.json"))
    stuck = dict(record["workers"][0], state="D", wchan="nfs_wait_bit_killable", text="")
    evidence = {1: Evidence(1, "n1", dump("loader_wait.stacks"), None, {}, workers_of({**record, "workers": [stuck]},
                                                                                      record["req"]))}
    f = hang_finding("stall", 8, running(2), evidence, now=0.0)
    assert "its worker pid 7783 is stuck, blocked in the kernel (state D, nfs_wait_bit_killable)" in f["text"]
    f = hang_finding("stall", 8, running(2), {1: Evidence(1, "n1", dump("loader_wait.stacks"), None, {})}, now=0.0)
    assert "rank 1 (n1) waits for the next batch from its DataLoader at <module> (loader_hang.py:45)" in f["text"]
    assert "its workers' stacks could not be read" in f["text"]


@pytest.mark.parametrize(("ranks", "long"), [(2, 0), (2, 1), (3, 0), (3, 1)])
def test_uneven_inputs_name_the_ranks_that_ran_out_of_data_first_and_the_fix(ranks, long):
    """uneven.py: the long rank waits in DDP's backward for its extra batch, the others in the final barrier."""
    evidence = {r: Evidence(r, "vm", dump("uneven_backward.stacks" if r == long else "uneven_barrier.stacks"),
                            FlightRecord(31, 30, "gloo:all_reduce" if r == long else "gloo:barrier"),
                            {"in": "backward" if r == long else "barrier", "since": 100.0, "last": "backward"})
                for r in range(ranks)}
    f = hang_finding("stall", 10, running(ranks), evidence, now=110.0)
    others = [r for r in range(ranks) if r != long]
    assert f["uneven"]["left"] == others and f["uneven"]["training"] == [long] and not f["mismatch"]
    assert [c["rank"] for c in f["culprits"]] == others and [v["rank"] for v in f["victims"]] == [long]
    who = ("rank " if len(others) == 1 else "ranks ") + ", ".join(map(str, others))
    assert f["text"].startswith(f"no rank made progress for 10 s: {who} ran out of data first: ")
    assert "left the training loop" in f["text"] and "at <module> (uneven.py:36)" in f["text"]
    assert f"rank {long} is still in the training loop, in backward at train (uneven.py:29)" in f["text"]
    assert f["hint"].startswith(f"uneven inputs: rank {long} had more batches than {who}")
    assert "DistributedSampler(dataset, drop_last=True)" in f["hint"] and "Join" in f["hint"]


def test_different_collectives_that_are_not_the_loops_own_stay_a_mismatch():
    progress = {0: P("a", "running", collective="all_gather"),
                1: P("a", "running", collective="barrier")}
    evidence = {0: Evidence(0, "a", "", None, {"in": "all_gather", "last": "all_reduce"}),
                1: Evidence(1, "a", "", None, {"in": "barrier", "last": "all_reduce"})}
    f = hang_finding("stall", 30, progress, evidence, now=0.0)
    assert f["uneven"] is None and f["mismatch"] and not f["culprits"]
    plain = {0: Evidence(0, "a", "", None, {"in": "all_reduce", "last": "all_reduce"}),
             1: Evidence(1, "a", "", None, {"in": "barrier", "last": "all_reduce"})}
    f = hang_finding("stall", 30, progress, plain, now=0.0)
    assert f["uneven"]["left"] == [1] and f["uneven"]["training"] == [0]  # a plain all_reduce loop, rank 1 left it
