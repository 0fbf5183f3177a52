"""`cockpit sweep show | rerun --failed` on a real local sweep of the demo (torchrun + gloo on CPU), and the
forecast lines of ps and the run summary."""

from __future__ import annotations

import json
from pathlib import Path

from test_local_sweep import SMALL, write_job
from test_runs_e2e import cockpit, only_run

from cockpit.launch import procs
from cockpit.run.store import list_runs, read_status


def test_rerun_failed_runs_only_the_failed_trials_with_identical_scripts_as_a_new_run(tmp_path):
    runs = tmp_path / "runs"
    job = write_job(tmp_path, "swr", {"grid": {"fail-step": ["1000", "3", "1000"]}, "max_parallel": 2},
                    args=[*SMALL, "--fail-rank", "1"])
    r = cockpit(runs, "run", str(job), "-q", timeout=240)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "sweep: 3 trials, CPU-only (cockpit sweep show" in r.stdout
    old_dir, old = only_run(runs)
    failing_trial_fails_the_sweep_but_not_the_others(runs, old_dir, old, r.stdout)

    show = json.loads(cockpit(runs, "sweep", "show", old.run_id, "--sort", "loss", "--json").stdout)
    rows = show["trials"]
    assert [t["state"] for t in rows] == ["succeeded", "succeeded", "failed"]  # the failed one has no last loss
    assert rows[0]["last_loss"] <= rows[1]["last_loss"] and rows[2]["trial"] == 1
    assert [t["steps"] for t in rows[:2]] == [10, 10] and rows[0]["forecast"]["total_steps"] == 10
    assert show["gpu_hours"] == 0.0
    text = cockpit(runs, "sweep", "show", old.run_id).stdout.splitlines()
    assert text[1].split()[:3] == ["TRIAL", "STATE", "STEPS"]
    assert text[3].split()[:3] == ["1", "failed", "3/10"] and text[3].endswith("--fail-step 3")

    r = cockpit(runs, "sweep", "rerun", old.run_id, "--failed", "-q", timeout=240)
    assert r.returncode == 1, r.stdout + r.stderr  # the same arguments fail the same way
    [new_dir] = [d for d, _ in list_runs(runs) if d != old_dir]
    new = read_status(new_dir)
    assert new.note.startswith(f"rerun of failed trials 1 of {old.run_id}, 1 at a time")
    assert [n.trial.index for n in new.nodes] == [1] and not (new_dir / "trial-0").exists()
    before = (old_dir / "trial-1/commands/node-0.sh").read_text()
    after = (new_dir / "trial-1/commands/node-0.sh").read_text()
    assert after == before.replace(old.run_id, new.run_id) and "--fail-step 3" in after
    assert read_status(new_dir / "trial-1").state == "failed"
    assert read_status(old_dir / "trial-1").state == "failed"  # the old run keeps its trial and logs
    assert (old_dir / "logs/agent.trial-1.log").exists()

    r = cockpit(runs, "sweep", "rerun", "swr-", "--failed")
    assert r.returncode == 2 and "matches 2 runs" in r.stderr
    ps = cockpit(runs, "ps").stdout.splitlines()
    assert "FORECAST" in ps[0] and "GPU-H" in ps[0]
    sweep_rows = [line for line in ps if line.startswith("swr-")]
    assert len(sweep_rows) == 2 and all(line.split()[7:9] == ["-", "cpu"] for line in sweep_rows), ps


def test_rerun_refuses_a_sweep_without_failures_and_a_plain_run(tmp_path):
    runs = tmp_path / "runs"
    job = write_job(tmp_path, "swok", {"grid": {"lr": ["0.01"]}})
    assert cockpit(runs, "run", str(job), "-q", timeout=240).returncode == 0
    _, status = only_run(runs)
    r = cockpit(runs, "sweep", "rerun", status.run_id, "--failed")
    assert r.returncode == 2 and "no trial failed, nothing to rerun" in r.stderr
    r = cockpit(runs, "sweep", "show", status.run_id, "--sort", "loss")
    assert r.returncode == 0 and "1 trials" in r.stdout and "CPU-only" in r.stdout


def failing_trial_fails_the_sweep_but_not_the_others(runs: Path, run_dir: Path, status, out: str) -> None:
    """A failing trial fails the sweep, not the other trials (was test_local_sweep's own run of a sweep of 2)."""
    assert status.state == "failed" and status.exit_code != 0
    assert "failed 1, succeeded 2" in status.note and "first to fail: trial 1 (rank 1" in status.note, status.note
    ok, bad = read_status(run_dir / "trial-0"), read_status(run_dir / "trial-1")
    assert ok.state == "succeeded" and bad.state == "failed" and bad.first_failure.rank == 1
    assert procs.run_pids(bad.run_id) == [] and procs.run_pids(ok.run_id) == []
    # The sweep's diagnosis is its failed trial's: rank 1's own exception, not torchrun's table blaming rank 0
    host = bad.hosts[0]
    first = (f"First failure (exit records): rank 1 on {host}: exit code 1: RuntimeError: injected failure on "
             "rank 1 after step 3")
    assert first in out, out
    logs = cockpit(runs, "logs", run_dir.name)  # a sweep's logs are its trials': say so, do not print nothing
    assert logs.returncode == 2 and f"(hint: cockpit logs {run_dir}/trial-0;" in logs.stderr, logs.stderr
    d = cockpit(runs, "diagnose", run_dir.name)
    assert d.stdout.startswith("ERROR   " + first) and f"{run_dir}/trial-1/logs/rank-1." in d.stdout, d.stdout
