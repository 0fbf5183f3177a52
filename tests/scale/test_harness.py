"""The scale harness itself: stand-in ranks write what cockpit's real readers parse, through the real launch
path and supervisor, and do what they are told (hang, straggle, die, stop, end). Small runs (6 to 12 ranks on
1 to 3 simulated hosts), a few seconds each; what is measured at scale is tests/bench/bench_scale.py's."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from helpers import wait_for

from scale import harness, standin

HUNG_AT = f"load_batch (standin.py:{standin.load_batch.__code__.co_firstlineno})"


@pytest.fixture
def launch(tmp_path):
    made: list[harness.Sim] = []

    def go(ranks: int, nodes: int, **kwargs) -> harness.Sim:
        home = tmp_path / f"sim{len(made)}"
        home.mkdir()
        sim = harness.launch_local(ranks, nodes, home=home, **kwargs)
        made.append(sim)
        sim.wait_up(120)
        return sim

    yield go
    for sim in made:
        sim.close()


def shown(text: str) -> dict[tuple[str, int], list[int]]:
    """(host, rank) -> the seq numbers of the stamped lines in `cockpit logs` output, in order."""
    out: dict[tuple[str, int], list[int]] = {}
    for m in re.finditer(r"^\[([^:\]]+):(\d+)\] \[cockpit\] step=\d+ .* seq=(\d+) ", text, re.M):
        out.setdefault((m.group(1), int(m.group(2))), []).append(int(m.group(3)))
    return out


def test_a_stand_in_job_runs_through_cockpit_run_and_every_rank_ends_logged(tmp_path):
    job = tmp_path / "six.yaml"
    job.write_text(harness.job_text("six", 6, None, stall_after=60, args=("--steps", "3")))
    env = harness.cockpit_env(tmp_path / "runs", tmp_path)
    r = subprocess.run([harness.sys.executable, "-m", "cockpit", "run", str(job)], capture_output=True, text=True,
                       cwd=harness.REPO, env=env, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    seen = shown(r.stdout)
    assert sorted(rank for _, rank in seen) == list(range(6)) and all(v == [1, 2, 3] for v in seen.values())
    ps = json.loads(subprocess.run([harness.sys.executable, "-m", "cockpit", "ps", "--json"], capture_output=True,
                                   text=True, cwd=harness.REPO, env=env, timeout=60, check=True).stdout)
    [run] = ps["runs"]
    assert run["state"] == "succeeded" and sorted(map(int, run["ranks"])) == list(range(6))
    assert {e["status"] for e in run["ranks"].values()} == {0}


def test_ps_and_logs_see_every_rank_of_every_simulated_host(launch):
    sim = launch(12, 3)
    [run] = json.loads(sim.cockpit("ps", "--json").stdout)["runs"]
    assert run["hosts"] == ["n0", "n1", "n2"] and run["world_size"] == 12
    assert {int(r): p["host"] for r, p in run["progress"].items()} == {r: sim.host_of(r) for r in range(12)}
    wait_for(lambda: len(shown(sim.cockpit("logs", sim.run_id, "-n", "1").stdout)) == 12, 30, "a line of each rank")
    sim.end()
    status = sim.wait_final(60)
    assert status["state"] == "succeeded" and sorted(map(int, status["ranks"])) == list(range(12))


def test_the_clock_stops_every_rank_at_the_hung_step_and_keeps_the_lost_steps_lost():
    hangs = [{"ranks": [5], "from": 10, "until": 14}, {"ranks": [2], "from": 20, "until": None}]
    assert standin.schedule(9, hangs) == (9, set())
    assert [standin.schedule(due, hangs) for due in (10, 13)] == [(9, {5}), (9, {5})]
    assert standin.schedule(14, hangs) == (10, set())
    assert standin.schedule(25, hangs) == (15, {2})


def test_a_rank_told_to_hang_is_named_alone_and_the_rest_wait_in_all_reduce(launch):
    sim = launch(12, 3, stall_after=3)
    sim.hang(5)
    found = wait_for(lambda: sim.finding("stall"), 60, "the watchdog's stall finding")
    assert [(c["rank"], c["host"], c["where"]) for c in found["culprits"]] == [(5, "n1", HUNG_AT)]
    assert sorted(v["rank"] for v in found["victims"]) == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11]
    assert {v["op"] for v in found["victims"]} == {"all_reduce"}
    # every process stopped at the same step: one collective the culprit never enqueued
    [seq] = {v["seq"] for v in found["victims"]}
    assert found["culprits"][0]["seq"] == seq - 1 and found["collective"]["seq"] == seq
    wait_for(lambda: Path(found["stacks"]).is_file(), 30, "the stall's stacks (written just after the finding)")
    sim.resume()  # the episode ends once a rank makes progress again
    wait_for(lambda: not sim.finding("stall"), 60, "the stall finding to clear")


def test_stacks_answer_only_the_asked_ranks_and_a_straggler_is_in_its_own_code(launch):
    sim = launch(8, 2)
    sim.straggle(3)

    def asked() -> dict | None:
        r = sim.cockpit("stacks", sim.run_id, "--json")
        ranks = {e["rank"]: e for e in json.loads(r.stdout)["ranks"]} if r.returncode == 0 else {}
        return ranks if ranks.get(3, {}).get("where") == HUNG_AT else None

    ranks = wait_for(asked, 60, "the straggler's stack in load_batch")
    assert sorted(ranks) == list(range(8)) and all(e["answered"] for e in ranks.values())
    assert {r for r, e in ranks.items() if e["collective"] == "all_reduce"} == {0, 1, 2, 4, 5, 6, 7}
    untouched = (sim.run_dir / "logs" / "rank-0.n0.stacks").read_text()
    one = json.loads(sim.cockpit("stacks", sim.run_id, "--rank", "6", "--json").stdout)["ranks"]
    assert [(e["rank"], e["answered"]) for e in one] == [(6, True)]
    assert (sim.run_dir / "logs" / "rank-0.n0.stacks").read_text() == untouched  # rank 0 was not asked


def test_a_rank_told_to_die_is_the_run_s_first_failure(launch):
    sim = launch(8, 2, grace=2)
    sim.die(6, 3)
    status = sim.wait_final(60)
    first = status["first_failure"]
    assert status["state"] == "failed" and (first["rank"], first["host"], first["status"]) == (6, "n1", 3)
    assert {int(r) for r, e in status["ranks"].items() if e["status"] == 143} == {0, 1, 2, 3, 4, 5, 7}


def test_a_stopped_node_is_named_with_its_ranks(launch):
    sim = launch(8, 2)
    pid = int((sim.run_dir / "logs" / "rank-0.n0.pid").read_text())
    os.kill(pid, signal.SIGSTOP)
    try:
        found = wait_for(lambda: sim.finding("stopped"), 60, "the watchdog's stopped finding")
    finally:
        os.kill(pid, signal.SIGCONT)
    assert sorted((c["rank"], c["host"], c["state"]) for c in found["culprits"]) == [
        (r, "n0", "stopped") for r in range(4)]


def test_logs_follow_shows_every_line_once_until_the_run_ends(launch):
    sim = launch(8, 2)
    follow = sim.popen("logs", "-f", sim.run_id, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: all(len((sim.run_dir / "logs" / f"rank-{r}.{sim.host_of(r)}.log").read_text()
                                 .splitlines()) >= 4 for r in range(8)), 60, "three steps of every rank")
        sim.end()
        out, err = follow.communicate(timeout=60)
    finally:
        follow.kill()
    assert follow.returncode == 0, err
    written = {(sim.host_of(r), r): [int(s) for s in re.findall(r" seq=(\d+) ", (
        sim.run_dir / "logs" / f"rank-{r}.{sim.host_of(r)}.log").read_text())] for r in range(8)}
    assert shown(out) == written


def test_a_rank_told_to_straggle_is_named_by_the_straggler_rule(launch):
    sim = launch(8, 2)
    sim.straggle(6)
    found = wait_for(lambda: sim.finding("straggler"), 60, "the watchdog's straggler finding")
    assert (found["rank"], found["host"]) == (6, "n1") and found["wait_share"] < found["others_share"]
    assert not sim.finding("stall")
