"""`cockpit run -q` as `make -s` / `pip -q` users expect: a run that succeeds prints its summary's one line and
nothing on stderr (no start line, no live notes); one that fails prints its errors (the summary with the first
failure, the diagnosis) and keeps the job's exit code; one healed by a restart succeeds with its whole summary (what
went wrong on the way is news). Real local runs of jobs/demo.yaml (torch, gloo on CPU)."""

from __future__ import annotations

import subprocess
import sys

from helpers import REPO, cockpit_env

SHORT = ("--", "--epochs", "1", "--steps-per-epoch", "8")


def cockpit(runs, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=300, env=cockpit_env(NO_COLOR="1", COCKPIT_RUNS_DIR=str(runs)))


def test_quiet_success_is_one_line_and_nothing_on_stderr(tmp_path):
    r = cockpit(tmp_path, "run", "jobs/demo.yaml", "-q", *SHORT)
    assert r.returncode == 0, r.stdout + r.stderr
    [line] = r.stdout.splitlines()
    assert line.startswith("== demo (demo-") and line.endswith("succeeded in " + line.split(" in ", 1)[1])
    assert "exit code 0" in line
    assert r.stderr == ""


def test_quiet_failure_shows_the_errors_and_keeps_the_exit_code(tmp_path):
    fail = (*SHORT, "--fail-rank", "1", "--fail-step", "2")
    quiet = cockpit(tmp_path / "q", "run", "jobs/demo.yaml", "-q", *fail)
    loud = cockpit(tmp_path / "l", "run", "jobs/demo.yaml", *fail)
    assert quiet.returncode == loud.returncode != 0, quiet.stdout + quiet.stderr
    assert "first failure: rank 1 on" in quiet.stdout and "diagnosis:" in quiet.stdout, quiet.stdout
    assert "[" not in quiet.stdout.split("==", 1)[0]  # no rank line before the summary
    assert "started (supervisor pid" in loud.stderr and "started (supervisor pid" not in quiet.stderr
    # the live notes of the failure (torchrun's worker_failed, the exception), said as they happened without -q,
    # are not said with it
    live = [line for line in loud.stderr.splitlines() if line.startswith("cockpit: [")]
    assert live, loud.stderr
    assert not [line for line in quiet.stderr.splitlines() if line.startswith("cockpit: [")], quiet.stderr


def test_quiet_healed_run_keeps_its_whole_summary(tmp_path):
    r = cockpit(tmp_path, "run", "jobs/demo-heal.yaml", "-q")
    assert r.returncode == 0, r.stdout + r.stderr
    assert ": succeeded in " in r.stdout.splitlines()[0]
    assert "attempts: 2" in r.stdout and "failure (rank 1 on" in r.stdout, r.stdout
