"""Folding at scale (issue 32), pure: 4,096 ranks' stacks fold into classes by signature, the fewest ranks first,
and the hang finding, the summary's table and ps name ranks as ranges. The dumps are the real ones of
tests/fixtures/hang (a 2-rank gloo run, torch 2.13.0 CPU: rank 1 stuck in load_batch, rank 0 in all_reduce),
given to each simulated rank with thread ids of its own, as every process has."""

from __future__ import annotations

import re
from pathlib import Path

from cockpit.cli.console import Painter, ps_table, summary
from cockpit.hang.classes import classes_json, fold
from cockpit.hang.evidence import Evidence
from cockpit.hang.finding import hang_finding, stacks_report
from cockpit.hang.stacks import FlightRecord, last_dump
from cockpit.hang.words import rank_list
from cockpit.run.progress import RankProgress as P
from cockpit.run.store import RunStatus
from cockpit.slurm.hostlist import compress, expand

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "hang"
VICTIM = last_dump((FIX / "victim.stacks").read_text())
CULPRIT = last_dump((FIX / "culprit.stacks").read_text())
RANKS, PER_HOST, HUNG = 4096, 8, 3073


def own_ids(text: str, rank: int) -> str:
    """The dump as another process would write it: every thread id its own."""
    return re.sub(r"0x[0-9a-f]{16}", lambda m: f"0x{int(m.group(0), 16) + rank * 0x10000:016x}", text)


def host(rank: int) -> str:
    return f"n{rank // PER_HOST:03d}"


def evidence(dumps: dict[int, str], enqueued: dict[int, int] | None = None) -> dict[int, Evidence]:
    seq = enqueued or {}
    return {r: Evidence(r, host(r), own_ids(text, r) if text else "",
                        FlightRecord(seq[r], seq[r] - 1, "gloo:all_reduce") if r in seq else None,
                        {"in": "all_reduce", "since": 100.0} if "all_reduce" in text else {"in": None})
            for r, text in dumps.items()}


def hung_among_4096() -> dict[int, Evidence]:
    dumps = {r: CULPRIT if r == HUNG else VICTIM for r in range(RANKS)}
    return evidence(dumps, {r: 3 if r == HUNG else 4 for r in range(RANKS)})


def test_a_hung_rank_among_4096_is_a_class_of_its_own_and_comes_first():
    classes = fold(hung_among_4096())
    assert [c.ranks for c in classes] == [(HUNG,), tuple(r for r in range(RANKS) if r != HUNG)]
    alone, rest = classes
    assert (alone.where, alone.collective, alone.hosts, alone.enqueued) == ("load_batch (hang.py:6)", None,
                                                                            (host(HUNG),), (3, 3))
    assert (rest.collective, rest.count, len(rest.hosts), rest.example, rest.enqueued) == ("all_reduce", 4095, 512,
                                                                                          0, (4, 4))
    assert alone.head() == "1 rank: load_batch (hang.py:6)" and rest.head().startswith("4,095 ranks: all_reduce")


def test_cockpit_stacks_text_of_4096_ranks_is_two_classes_and_every_rank_stays_reachable():
    ev = hung_among_4096()
    text = stacks_report(ev, every=False)
    lines = text.splitlines()
    assert len(lines) <= 40 and "-- rank " not in text
    assert lines[0].startswith("4,096 ranks on 512 hosts: 2 different stacks, the fewest ranks first")
    assert lines[1] == "== 1 rank: outside any collective, at load_batch (hang.py:6) =="
    assert lines[2] == "   rank 3073 on n384; flight recorder: enqueued #3"
    at = lines.index("== 4,095 ranks: in all_reduce, at <module> (hang.py:10) ==")
    assert lines[at + 1] == "   ranks 0-3072, 3074-4095 on n[000-511]; flight recorder: enqueued #4"
    every = stacks_report(ev)  # --all, and the report the watchdog keeps: each rank's own, after the classes
    assert every.startswith(text.rstrip("\n")) and every.count("\n-- rank ") == RANKS
    assert f"-- rank {HUNG} (outside any collective, at load_batch (hang.py:6); flight recorder" in every
    [js] = [c for c in classes_json(ev) if c["count"] == 1]
    assert (js["ranks"], js["ranges"], js["hosts"]) == ([HUNG], "rank 3073", ["n384"])


def test_two_groups_of_stacks_stay_two_however_their_ranks_interleave():
    dumps = {r: VICTIM if r % 2 else CULPRIT for r in range(RANKS)}  # odd ranks in all_reduce, even ones not
    classes = fold(evidence(dumps))
    assert [c.ranks for c in classes] == [tuple(range(0, RANKS, 2)), tuple(range(1, RANKS, 2))]
    assert [c.count for c in classes] == [2048, 2048] and classes[0].collective is None


def test_a_rank_at_another_line_or_silent_is_its_own_class_the_same_frames_are_one():
    moved = VICTIM.replace('hang.py", line 10 in <module>', 'hang.py", line 12 in <module>')
    dumps = {**{r: VICTIM for r in range(16)}, 5: moved, 9: ""}
    classes = fold(evidence(dumps))
    assert [(c.ranks, c.what) for c in classes[:2]] == [((5,), "in all_reduce, at <module> (hang.py:12)"),
                                                        ((9,), "no answer: stopped, frozen or without the hook")]
    assert classes[2].ranks == tuple(r for r in range(16) if r not in (5, 9)) and len(classes) == 3


def test_the_hang_finding_about_4096_ranks_names_the_culprit_alone_and_the_victims_as_ranges():
    ev = hung_among_4096()
    progress = {r: P(host(r), "running") for r in range(RANKS)}
    f = hang_finding("stall", 61.0, progress, ev, now=160.0, run_ref="r1")
    assert [(c["rank"], c["host"]) for c in f["culprits"]] == [(HUNG, "n384")] and len(f["victims"]) == RANKS - 1
    assert f["text"] == ("no rank made progress for 61 s: rank 3073 (n384) is stuck in load_batch (hang.py:6), "
                         "outside any collective; ranks 0-3072, 3074-4095 wait in all_reduce (collective #4, "
                         "gloo:all_reduce) for 60 s")
    assert f["next"] == "cockpit stacks r1 --rank 3073"


def test_culprits_doing_the_same_are_one_part_of_the_finding():
    progress = {r: P(host(r), "stopped" if r < PER_HOST else "running") for r in range(64)}
    ev = evidence({r: VICTIM for r in range(PER_HOST, 64)})
    f = hang_finding("stopped", 5.0, progress, ev, now=160.0, run_ref="r1")
    assert f["text"].startswith("a rank's process is stopped: ranks 0-7 (n000) are stopped (SIGSTOP, state T); "
                                "ranks 8-63 wait in all_reduce")
    assert f["hint"].startswith("ranks 0-7 are the culprits")


def test_rank_ranges_and_hostlists_read_back():
    assert rank_list([3, 0, 1, 2, 7, 9, 10]) == "ranks 0-3, 7, 9, 10" and rank_list([4]) == "rank 4"
    hosts = [host(r) for r in range(0, RANKS, PER_HOST)] + ["gpu7", "login"]
    assert compress(hosts) == "n[000-511],gpu7,login" and expand(compress(hosts)) == hosts
    assert compress(["n001", "n002", "n004", "n010"]) == "n[001-002,004,010]"


def _status(ranks: int, hosts: int, failed: int | None) -> RunStatus:
    exits = {str(r): {"rank": r, "host": f"n{r * hosts // ranks:03d}", "status": 1 if r == failed else 0,
                      "time": 1000.0 + 60 + r / ranks} for r in range(ranks)}
    return RunStatus.from_dict({
        "run_id": "big-1", "name": "big", "state": "failed" if failed is not None else "succeeded",
        "launcher": "local", "job_file": "big.yaml", "created": 1000.0, "started": 1000.0, "ended": 1070.0,
        "exit_code": 1,
        "hosts": [f"n{k:03d}" for k in range(hosts)], "world_size": ranks, "ranks": exits})


def test_the_summary_of_4096_ranks_is_a_row_per_way_of_ending_and_ps_lists_the_nodes_as_a_hostlist(tmp_path):
    text = summary(tmp_path, _status(RANKS, 512, HUNG), Painter(False))
    rows = [line for line in text.splitlines() if line.startswith("  ") and "(n" in line]
    assert len(rows) == 2 and "exit code 1" in rows[0] and rows[0].endswith(" 3073 (n384)")
    assert "4,095  ok" in rows[1] and rows[1].endswith(" 0-3072,3074-4095 (n[000-511])")
    small = summary(tmp_path, _status(8, 2, 3), Painter(False))  # a few ranks: still a row each
    assert sum(1 for line in small.splitlines() if re.match(r"^\s+\d+\s+n00[01] ", line)) == 8
    table = ps_table([(tmp_path, _status(RANKS, 512, None))])
    assert " n[000-511] " in table.splitlines()[1]


def test_where_ranks_ended_is_said_once_per_place_with_their_ranks():
    from cockpit.hang.stacks import Frame
    from cockpit.insight.cause import Place, places_said

    at = Frame("/job/train.py", 88, "train")
    waiting, own = Place("all_reduce", at, (at,)), Place(None, Frame("/job/train.py", 48, "load"), ())
    places = {**{r: waiting for r in range(RANKS) if r != HUNG}, HUNG: own}
    assert places_said(sorted(places), places, "was", "were") == (
        "ranks 0-3072, 3074-4095 were in all_reduce at train.py:88, in train; rank 3073 was in its own code at "
        "train.py:48, in load")
    assert places_said([1], places) == "rank 1 in all_reduce at train.py:88, in train"
