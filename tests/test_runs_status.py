"""A run whose status.json is malformed shows in `ps` as unreadable with the reason and leaves every other run
alone; `logs` / `attach` / `stop` on it say why, exit 2. `logs --rank` outside the run's ranks is an error.
Real `cockpit` processes over a runs directory made here (no run is started)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from helpers import REPO, cockpit_env

from cockpit.launch.control import reconcile_runs
from cockpit.run.store import UNREADABLE, RankExit, RunStatus, first_failure, list_runs, read_status, write_status

GOOD = RunStatus(run_id="good-1", name="good", launcher="local", job_file="j.yaml", hosts=["vm"], world_size=2,
                 state="succeeded", exit_code=0, created=1000.0)
BROKEN = {
    "list-2": "[1, 2]\n",
    "trunc-3": GOOD.to_json()[:40],
    "empty-4": "",
    "types-5": GOOD.to_json().replace('"world_size": 2', '"world_size": "two"'),
    "hosts-6": GOOD.to_json().replace('"vm"', "7"),
    "missing-7": json.dumps({"run_id": "missing-7"}),
    "node-8": GOOD.to_json().replace('"nodes": []', '"nodes": [{"node_rank": 0}]'),
    "rank-9": GOOD.to_json().replace('"ranks": {}', '"ranks": {"3": {"rank": "3", "host": "vm", "status": 0}}'),
    "failure-10": GOOD.to_json().replace('"first_failure": null', '"first_failure": {"rank": 1}'),
}
REASONS = {"list-2": "expected a JSON object, found list", "trunc-3": "not valid JSON", "empty-4": "empty",
           "types-5": 'world_size: expected a number or null, found "two"',
           "hosts-6": "hosts: expected a list of host names", "missing-7": "name: missing",
           "node-8": "nodes[0]: host: missing", "rank-9": 'ranks.3: rank: expected a number, found "3"',
           "failure-10": "first_failure: host: missing"}


@pytest.fixture
def runs(tmp_path):
    (tmp_path / "good-1" / "logs").mkdir(parents=True)
    write_status(tmp_path / "good-1", GOOD)
    for rank in (0, 1):
        (tmp_path / "good-1" / "logs" / f"rank-{rank}.vm.log").write_text(f"hello from {rank}\n")
    for name, text in BROKEN.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "status.json").write_text(text)
    (tmp_path / "not-a-run").mkdir()  # no status.json: not listed
    return tmp_path


def cockpit(*args: str, runs_dir) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args, "--runs-dir", str(runs_dir)],
                          capture_output=True, text=True, cwd=REPO, timeout=60, env=cockpit_env(NO_COLOR="1"))


def test_list_runs_keeps_unreadable_runs_with_the_reason(runs):
    rows = {d.name: s for d, s in list_runs(runs)}
    assert set(rows) == {"good-1", *BROKEN}
    assert rows["good-1"].state == "succeeded"
    for name, reason in REASONS.items():
        assert rows[name].state == UNREADABLE and reason in rows[name].note, (name, rows[name].note)
        assert read_status(runs / name) is None
    before = {name: (runs / name / "status.json").read_text() for name in BROKEN}
    assert [s.state for _, s in reconcile_runs(list_runs(runs))].count(UNREADABLE) == len(BROKEN)
    assert {name: (runs / name / "status.json").read_text() for name in BROKEN} == before  # never written over


def test_ps_shows_the_bad_runs_and_the_good_one(runs):
    r = cockpit("ps", runs_dir=runs)
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert "good-1" in r.stdout and "succeeded" in r.stdout
    for name, reason in REASONS.items():
        assert name in r.stdout and reason in r.stdout
    r = cockpit("ps", "--json", runs_dir=runs)
    states = {run["run_id"]: run["state"] for run in json.loads(r.stdout)["runs"]}
    assert states == {"good-1": "succeeded", **{name: "unreadable" for name in BROKEN}}


@pytest.mark.parametrize("command", ["logs", "attach", "stop"])
def test_commands_on_an_unreadable_run_say_why(runs, command):
    for name in ("list-2", "trunc-3"):
        r = cockpit(command, name, runs_dir=runs)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert r.stderr.startswith(f"cockpit: {runs / name / 'status.json'}: {REASONS[name]}")
        assert "(hint: " in r.stderr
    r = cockpit("logs", "good-1", runs_dir=runs)
    assert r.returncode == 0 and "hello from 0" in r.stdout and "hello from 1" in r.stdout


def test_logs_for_a_rank_the_run_does_not_have(runs):
    r = cockpit("logs", "good-1", "--rank", "7", runs_dir=runs)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == ("cockpit: run good-1 has ranks 0-1, not rank 7 (hint: leave out --rank to see every "
                        "rank)\n")
    r = cockpit("logs", "good-1", "--rank", "1", runs_dir=runs)
    assert r.returncode == 0 and r.stdout == "hello from 1\n"


def _exit(rank: int, status: int, time: float) -> RankExit:
    return RankExit(rank=rank, host="vm", status=status, time=time)


def test_first_failure_is_the_earliest_exit_unless_a_rank_was_killed_just_after():
    # rank 1 saw its peer's socket close and exited 1; rank 0's wrapper, scheduled later, stamped its SIGKILL
    # 0.4 ms after (seen on a busy 2-core machine): the kill is the cause
    exits = {0: _exit(0, 128 + signal.SIGKILL, 100.0004), 1: _exit(1, 1, 100.0)}
    assert first_failure(exits).rank == 0
    # a kill long after the first error is torchrun's escalation, a consequence
    exits = {0: _exit(0, 128 + signal.SIGKILL, 131.0), 1: _exit(1, 1, 100.0)}
    assert first_failure(exits).rank == 1
    # an abort right after a peer's error is the usual reaction to it (gloo/NCCL raise, C++ aborts)
    exits = {0: _exit(0, 128 + signal.SIGABRT, 100.01), 1: _exit(1, 1, 100.0)}
    assert first_failure(exits).rank == 1
    # a segfault is a cause too; clean exits are never failures
    exits = {0: _exit(0, 0, 99.0), 1: _exit(1, 1, 100.0), 2: _exit(2, 128 + signal.SIGSEGV, 100.5)}
    assert first_failure(exits).rank == 2
    assert first_failure({0: _exit(0, 0, 1.0)}) is None


def test_first_failure_prefers_the_rank_that_did_not_lose_a_peer(tmp_path):
    """Two ranks exited 1 a few ms apart; the earlier stamp is rank 0's, whose log says gloo lost its peer
    (a busy machine ran rank 1's wrapper late): rank 1, whose own error it was, is the first failure."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank-0.n1.log").write_text("[cockpit] step=40\nRuntimeError: [../third_party/gloo/gloo/transport/tcp/"
                                        "pair.cc:534] Connection closed by peer [127.0.0.1]:44031\n")
    (logs / "rank-1.n2.log").write_text("[cockpit] step=40\nRuntimeError: injected failure at step 5\n")
    exits = {0: RankExit(0, "n1", 1, 100.000), 1: RankExit(1, "n2", 1, 100.004)}
    assert first_failure(exits).rank == 0  # without the logs: the earliest stamp
    assert first_failure(exits, tmp_path).rank == 1
    later = {0: RankExit(0, "n1", 1, 100.0), 1: RankExit(1, "n2", 1, 103.0)}  # seconds apart: order decides
    assert first_failure(later, tmp_path).rank == 0
