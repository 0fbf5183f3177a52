"""A local run that heals itself (recover:), for real: torchrun + gloo DDP on the CPU, the demo and a plain
script failing on purpose. Four runs, each checking several things, since each costs seconds of torch start."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env

from cockpit.launch import procs
from cockpit.run.store import list_runs

pytestmark = pytest.mark.slow
TINY = ["--epochs", "1", "--steps-per-epoch", "30", "--hidden", "16", "--checkpoint-every", "5"]


def job(tmp_path: Path, script: str, recover: str, extra: str = "") -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(f"name: heal\nscript: {REPO / 'jobs' / script}\nlauncher: local\ngpus: none\n{extra}"
                    f"recover:\n{recover}")
    return path


def run(tmp_path: Path, job_file: Path, *args: str, opts: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess,
                                                                                        Path, object]:
    runs = tmp_path / "runs"
    r = subprocess.run([sys.executable, "-m", "cockpit", "run", str(job_file), "-q", *opts, "--", *args],
                       capture_output=True, text=True, cwd=REPO, timeout=400,
                       env=cockpit_env(COCKPIT_RUNS_DIR=str(runs), NO_COLOR="1"))
    [(run_dir, status)] = list_runs(runs)
    assert procs.run_pids(status.run_id) == []
    return r, run_dir, status


def ps_json(tmp_path: Path) -> dict:
    r = subprocess.run([sys.executable, "-m", "cockpit", "ps", "--json"], capture_output=True, text=True, cwd=REPO,
                       env=cockpit_env(COCKPIT_RUNS_DIR=str(tmp_path / "runs")), timeout=60)
    assert r.returncode == 0, r.stderr
    [found] = json.loads(r.stdout)["runs"]
    return found


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics" / "rank-0.jsonl").read_text().splitlines()]


def test_a_raise_is_healed_from_the_last_checkpoint_and_accounted(tmp_path):
    # the shipped example (rank 1 raises after step 12 in attempt 0; attempts: 2; a checkpoint every 5 steps), -q
    r, run_dir, status = run(tmp_path, REPO / "jobs" / "demo-heal.yaml")
    assert r.returncode == 0 and status.state == "succeeded", r.stdout + r.stderr
    # -q keeps the whole summary (was test_run_quiet's own run of this job)
    assert ": succeeded in " in r.stdout.splitlines()[0] and "failure (rank 1 on" in r.stdout, r.stdout
    first, second = status.attempts
    assert (first.end, first.culprit_rank, first.step) == ("failure", 1, 12)
    assert "RuntimeError: injected failure on rank 1 after step 12" in first.cause and "demo.py:" in first.cause
    assert first.decision.startswith("relaunched as attempt 1 of 3 after a failure")
    # resumed at the last checkpoint (step 10), not from 0; the steps after it were made again, with the same loss
    assert (second.end, second.resumed_from, second.step) == ("succeeded", 10, 30)
    records = metrics(run_dir)
    again = [rec for rec in records if rec["time"] >= second.started]
    assert again[0]["step"] == 11
    before = {rec["step"]: rec["loss"] for rec in records if rec["time"] < second.started}
    assert {rec["step"]: rec["loss"] for rec in again if rec["step"] <= 12} == {11: before[11], 12: before[12]}
    assert 0 < status.goodput < 1
    # the same run directory: one set of logs, appended, with a marker line; the first attempt's records aside
    log = (run_dir / "logs" / f"rank-1.{status.hosts[0]}.log").read_text()
    assert log.count("[cockpit] start rank=1") == 2
    assert "[cockpit] attempt 1 (COCKPIT_ATTEMPT=1) of 3 starts: relaunched after a failure of attempt 0 (rank 1" \
        in log
    assert sorted(p.name.split(".")[-1] for p in (run_dir / "logs" / "attempt-0").glob("rank-*.exit")) == ["exit"] * 2
    # the summary, ps and ps --json say so
    assert re.search(r"attempts: 2, goodput \d+%", r.stdout), r.stdout
    assert "steps 10..30, first step" in r.stdout
    assert re.search(r"lost: [\d.]+ s to failures", r.stdout) and first.lost_s > 0, r.stdout
    found = ps_json(tmp_path)
    assert [a["end"] for a in found["attempts"]] == ["failure", "succeeded"] and found["goodput"] == status.goodput
    table = subprocess.run([sys.executable, "-m", "cockpit", "ps"], capture_output=True, text=True, cwd=REPO,
                           env=cockpit_env(COCKPIT_RUNS_DIR=str(tmp_path / "runs")), timeout=60).stdout
    assert "ATTEMPTS" in table.splitlines()[0] and " 2/3 " in table.splitlines()[1]
    # the diagnosis is the last attempt's (healed: no error), the first attempt's failure an earlier attempt
    diag = subprocess.run([sys.executable, "-m", "cockpit", "diagnose", str(run_dir), "--json"], capture_output=True,
                          text=True, cwd=REPO, env=cockpit_env(COCKPIT_RUNS_DIR=str(tmp_path / "runs")), timeout=60)
    findings = json.loads(diag.stdout)["findings"]
    assert not [f for f in findings if f["severity"] == "error"], findings
    assert [f["title"] for f in findings if f["code"] == "earlier_attempt"] == [
        f"attempt 0 ended by a failure: {first.cause}"], findings


def test_a_hang_is_found_as_a_stall_and_healed(tmp_path):
    r, run_dir, status = run(tmp_path, job(tmp_path, "demo.py", "  attempts: 1\n  on: [stall]\n", "stall_after: 5\n"),
                             *TINY, "--fail-rank", "1", "--fail-step", "12", "--fail-mode", "hang",
                             "--fail-attempts", "1")
    assert r.returncode == 0 and status.state == "succeeded", r.stdout + r.stderr
    first, second = status.attempts
    assert (first.end, first.culprit_rank) == ("stall", 1) and "maybe_fail" in first.cause
    assert (second.resumed_from, second.step) == (10, 30)
    assert list((run_dir / "logs").glob("stacks.*.txt"))  # the evidence, gathered before the relaunch


def test_the_same_exception_twice_is_not_retried_and_a_plain_script_resumes(tmp_path):
    # the plain script (no cockpit.train) saves under $COCKPIT_RUN_DIR and raises at step 12 in every attempt
    r, run_dir, status = run(tmp_path, job(tmp_path, "plain_resume.py", "  attempts: 3\n"), "--fail-step", "12")
    assert r.returncode == 1 and status.state == "failed", r.stdout + r.stderr
    assert len(status.attempts) == 2
    assert status.note.startswith("not retried: the same exception at the same place in attempts 0 and 1 "
                                  "(RuntimeError at plain_resume.py:"), status.note
    assert "not retried: the same exception" in r.stdout
    log = (run_dir / "logs" / f"rank-1.{status.hosts[0]}.log").read_text()
    assert "[plain] rank 1 attempt 0 starts at step 0" in log and "[plain] rank 1 attempt 1 starts at step 10" in log


def test_attempts_used_up_give_up_and_exit_1(tmp_path):
    r, _run_dir, status = run(tmp_path, job(tmp_path, "demo.py", "  attempts: 1\n"), *TINY, "--fail-rank", "0",
                              "--fail-step", "3", "--fail-mode", "kill")
    assert r.returncode == 1 and status.state == "failed", r.stdout + r.stderr
    assert [a.end for a in status.attempts] == ["failure", "failure"]
    assert status.note.startswith("gave up after 2 attempts: rank 0 was killed by SIGKILL"), status.note
    assert "gave up after 2 attempts" in r.stdout


def test_attempts_used_up_after_a_grace_too_short_for_torchrun_still_exit_1(tmp_path):
    # --grace 0: the supervisor itself ends torchrun (SIGTERM) before its teardown is over; its 143 is the
    # supervisor's doing, not the job's: the run that gave up exits 1 all the same
    r, _run_dir, status = run(tmp_path, job(tmp_path, "demo.py", "  attempts: 1\n"), *TINY, "--fail-rank", "1",
                              "--fail-step", "3", "--fail-mode", "kill", opts=("--grace", "0"))
    assert r.returncode == 1 and status.state == "failed" and status.exit_code == 1, r.stdout + r.stderr
    assert status.note.startswith("gave up after 2 attempts: rank 1 was killed by SIGKILL"), status.note


def test_a_stop_asked_for_is_never_relaunched(tmp_path):
    from helpers import wait_for

    from cockpit.run.store import read_status

    runs = tmp_path / "runs"
    env = cockpit_env(COCKPIT_RUNS_DIR=str(runs), NO_COLOR="1")
    job_file = job(tmp_path, "demo.py", "  attempts: 3\n")
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(job_file), "-q", "--", "--epochs", "1",
                             "--steps-per-epoch", "1000000", "--hidden", "16"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (runs.is_dir() and any((d / "metrics" / "rank-0.jsonl").exists() for d in runs.iterdir())),
                 240, "the first step")
        [(run_dir, _)] = list_runs(runs)
        stop = subprocess.run([sys.executable, "-m", "cockpit", "stop", run_dir.name], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120)
        assert stop.returncode == 0, stop.stderr
        out, _err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    status = read_status(run_dir)
    assert status.state == "stopped" and [a.end for a in status.attempts] == ["stopped"], out
    assert "relaunched" not in (status.note or "") and procs.run_pids(status.run_id) == []
