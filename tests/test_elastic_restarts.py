"""torchrun's own restarts (a job's max_restarts, issue 33 item 10): the supervisor lets torchrun restart the
workers while it has restarts left (its --grace starts once torchrun itself ends, or at a stop), and the summary
and the diagnosis say which rank failed and which restart of how many followed. The decision and the reading of
the set-aside rounds on their own; one real local run (torchrun, gloo on CPU) whose rank 1 fails in the first
round only, under a grace of 1 s that the restarted round outlasts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import REPO, cockpit_env

from cockpit.insight.restarted import restarted_over, torchrun_restarts
from cockpit.logs.diagnose.model import Finding
from cockpit.run import layout
from cockpit.run.records import FirstFailure
from cockpit.run.restarts import NO_RECORD, SETTLE_S, restarts, restarts_left
from cockpit.run.status import RunStatus, StatusError


@pytest.mark.parametrize(("most", "made", "ended", "stopping", "left"), [
    (2, 0, False, False, True),    # round 0 failed, two restarts allowed: torchrun restarts
    (2, 1, False, False, True),    # round 1 failed: one left
    (2, 2, False, False, False),   # round 2 failed: none left, the grace applies
    (2, 0, True, False, False),    # torchrun itself ended: the grace applies
    (2, 0, False, True, False),    # a stop was asked for
    (0, 0, False, False, False),   # max_restarts: 0, the job's first failure ends it
    (None, 0, False, False, False),
])
def test_a_failure_is_torchruns_while_it_has_restarts_left(most, made, ended, stopping, left):
    assert restarts_left(most, made, ended, stopping) is left


def _exit(aside, rank: int, status: int, when: float) -> None:
    aside.mkdir(parents=True, exist_ok=True)
    (aside / f"rank-{rank}.vm.exit").write_text(f"{status} {when}\n")


def test_rounds_set_aside_name_their_failure_and_the_latest_is_read_again(tmp_path):
    logs = tmp_path / layout.LOGS
    _exit(logs / "restart-0", 0, 143, 11.0)  # rank 0 torn down by torchrun after rank 1's exit
    _exit(logs / "restart-0", 1, 3, 10.0)
    (logs / "restart-1").mkdir()  # round 1's wrappers have not moved their records yet
    (logs / "restart-x").mkdir()  # not a round
    first = restarts(tmp_path, [])
    assert [(r.rank, r.status, r.description) for r in first] == [(1, 3, "exit code 3"), (None, 0, NO_RECORD)]
    _exit(logs / "restart-1", 0, 1, 20.0)
    again = restarts(tmp_path, first)
    assert again[0] is first[0] and (again[1].rank, again[1].status) == (0, 1)


def test_a_round_blames_the_rank_that_died_first_not_the_one_that_lost_its_peer(tmp_path):
    # rank 0's wrapper stamped its end first (a busy machine), but its log says its peer went away: rank 1's
    # failure, 0.3 s later by the stamps, is the round's cause, as for the run's own first failure
    logs = tmp_path / layout.LOGS
    _exit(logs / "restart-0", 0, 1, 10.0)
    _exit(logs / "restart-0", 1, 1, 10.3)
    (logs / "rank-0.vm.log").write_text("step 5\nRuntimeError: [gloo/transport/tcp/pair.cc:537] Read error "
                                        "[127.0.0.1]:4775: Connection reset by peer\n")
    (logs / "rank-1.vm.log").write_text("step 5\nValueError: bad batch\n")
    [found] = restarts(tmp_path, [])
    assert (found.rank, found.status) == (1, 1), found
    # once the round settled, the next round's lines in the same logs change nothing: its verdict stands
    (logs / "rank-1.vm.log").write_text("Connection reset by peer\n" + "round 1 step\n" * 100)
    old = time.time() - SETTLE_S - 1
    os.utime(logs / "restart-0", (old, old))
    assert restarts(tmp_path, [found]) == [found]
    assert restarts(tmp_path, [])[0].rank == 1  # (a first look still reads it: nothing known yet)


def test_restarts_round_trip_in_status_json_and_a_bad_one_is_refused():
    ff = FirstFailure(1, "vm", 3, 10.0, "exit code 3")
    s = RunStatus("r", "n", "local", "j.yaml", ["vm"], 2, max_restarts=2, restarts=[ff])
    back = RunStatus.from_json(s.to_json())
    assert back.restarts == [ff] and back.max_restarts == 2
    assert "restarts" not in RunStatus("r", "n", "local", "j.yaml", ["vm"], 2).to_dict()
    with pytest.raises(StatusError, match=r"restarts\[0\]"):
        RunStatus.from_dict({**s.to_dict(), "restarts": [7]})


def test_the_diagnosis_of_a_run_that_succeeded_after_a_restart():
    s = RunStatus("r", "n", "local", "j.yaml", ["vm"], 2, state="succeeded", max_restarts=2,
                  restarts=[FirstFailure(1, "vm", 3, 10.0, "exit code 3")])
    said = [f.title for f in torchrun_restarts(s)]
    assert said == ["rank 1 on vm failed (exit code 3); torchrun restarted the workers (restart 1 of 2)"]
    failed = Finding("error", "worker_failed", "The launcher stopped the job", "", ())
    assert [f.severity for f in restarted_over(s, (failed,))] == ["info"]
    s.state = "failed"
    assert restarted_over(s, (failed,)) == (failed,)  # the last round failed: torchrun's words are the run's


SCRIPT = textwrap.dedent("""\
    import os, sys, time
    rank, restart = int(os.environ["RANK"]), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    print(f"rank {rank} round {restart}", flush=True)
    if restart == 0:
        time.sleep(0.3)
        sys.exit(3 if rank == 1 else 0)
    time.sleep(3)  # the restarted round outlasts the run's grace of 1 s
    print("done", flush=True)
""")


def test_a_real_run_that_torchrun_restarts_succeeds_and_says_so(tmp_path):
    (tmp_path / "elastic.py").write_text(SCRIPT)
    (tmp_path / "elastic.yaml").write_text("name: elastic\nscript: elastic.py\nlauncher: local\ngpus: none\n"
                                           "procs_per_node: 2\nmax_restarts: 2\n")
    r = subprocess.run([sys.executable, "-m", "cockpit", "run", str(tmp_path / "elastic.yaml"), "-q", "--grace", "1"],
                       capture_output=True, text=True, cwd=REPO, timeout=180,
                       env=cockpit_env(NO_COLOR="1", COCKPIT_RUNS_DIR=str(tmp_path / "runs")))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "succeeded in" in r.stdout.splitlines()[0], r.stdout
    assert ("restart: rank 1 on" in r.stdout and "failed (exit code 3); torchrun restarted the workers "
            "(restart 1 of 2)" in r.stdout), r.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    status = json.loads((run_dir / layout.STATUS).read_text())
    assert [(x["rank"], x["status"]) for x in status["restarts"]] == [(1, 3)]
    assert {e["status"] for e in status["ranks"].values()} == {0}
