"""How the run summary and ps show cockpit.hang's findings (pure: a RunStatus in, text out)."""

from __future__ import annotations

from pathlib import Path

from cockpit.cli.console import Painter, summary
from cockpit.insight.diagnosis import health
from cockpit.run.findings import LiveFinding
from cockpit.run.store import FirstFailure, RunStatus

STALL = {"kind": "stall", "severity": "error", "quiet_s": 612.0, "text": "no rank made progress for 612 s: ...",
         "hint": "rank 1 is the culprit", "stacks": "/runs/r/logs/stacks.x.txt",
         "culprits": [{"rank": 1, "host": "gpu2", "state": "running", "where": "load_batch (train.py:48)"}],
         "victims": [{"rank": 0, "host": "gpu1", "state": "running", "op": "all_reduce"}]}


def status(**kw) -> RunStatus:
    base = {"run_id": "r", "name": "job", "launcher": "local", "job_file": "j.yaml", "hosts": ["gpu1"],
            "world_size": 2, "state": "running", "created": 0.0, "started": 1.0}
    for name in ("findings", "history"):  # as status.json holds them: typed once read
        if name in kw:
            kw[name] = [LiveFinding.from_dict(f) for f in kw[name]]
    return RunStatus(**{**base, **kw})


def test_a_first_failure_that_only_timed_out_waiting_is_called_a_victim_and_the_culprit_named(tmp_path: Path):
    ff = FirstFailure(rank=0, host="gpu1", status=1, time=1801.0, description="exit code 1")
    text = summary(tmp_path, status(state="failed", ended=1802.0, exit_code=1, first_failure=ff, findings=[STALL]),
                   Painter(False))
    assert ("first failure: rank 0 on gpu1: exit code 1, 30.0 min after start (a victim of the stall: it waited in "
            "a collective for rank 1, the culprit)") in text
    assert "stall: no rank made progress for 612 s" in text and "every rank's stack: /runs/r/logs/stacks.x.txt" in text


def test_ps_health_column():
    assert health(status(findings=[STALL])) == "stalled 10.2 min (rank 1)"
    straggler = {"kind": "straggler", "severity": "warning", "rank": 5}
    stopped = {**STALL, "kind": "stopped", "culprits": [{"rank": 3, "state": "stopped"}]}
    assert health(status(findings=[straggler])) == "straggler:5"
    assert health(status(findings=[stopped])) == "stopped:3"
    assert health(status(progress={"0": {}})) == "ok" and health(status(state="succeeded")) == "-"


def test_a_cleared_stall_stays_in_the_summary_diagnose_and_ps_with_when_how_long_who_and_where(tmp_path: Path):
    from cockpit.insight.diagnosis import hang_findings
    from cockpit.run.handle import Run
    from cockpit.run.store import create_run_dir, write_status

    cleared = {**STALL, "severity": "warning", "began": 41.0, "cleared": 81.5, "lasted_s": 40.5, "rule": "adaptive",
               "culprits": [{"rank": 0, "host": "gpu1", "state": "running", "where": "evaluate (train.py:90)"}]}
    done = status(state="succeeded", ended=200.0, exit_code=0, history=[cleared])
    text = summary(tmp_path, done, Painter(False))
    assert "stall 40.0 s after start, cleared after 40.5 s: no rank made progress for 612 s" in text
    assert health(done) == "- (1 cleared)" and health(status(history=[cleared], progress={"0": {}})) == "ok (1 cleared)"
    assert done.to_dict()["history"] == [cleared] and "history" not in status().to_dict()  # ps --json; absent: left out
    run_dir = create_run_dir(tmp_path, "r")
    write_status(run_dir, done)
    [f] = hang_findings(Run.load(run_dir))
    assert (f.severity, f.code) == ("warning", "stall_cleared") and f.title.startswith("stall 40.0 s after start")
    assert "a pause (an evaluation, a checkpoint or a slow read on rank 0), not a hang" in f.hint
    assert "3 x a pause this long" in f.hint


def test_ps_says_starting_while_a_slow_start_is_under_way():
    watch = {"phase": "starting", "starting": "starting: ranks 0, 1 in load (t.py:3) for 70 s", "starting_s": 70.0}
    assert health(status(watch=watch, progress={"0": {}})) == "starting 70.0 s"
    assert health(status(watch={"phase": "running", "starting": None}, progress={"0": {}})) == "ok"
