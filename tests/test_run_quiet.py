"""`cockpit run -q` as `srun --quiet` users expect: no rank lines; what cockpit itself has to say stays (the start
line, the notes of a failure or a stall as they are found, the summary, the diagnosis), and the exit code is the
job's. Real local runs of jobs/demo.yaml (torch, gloo on CPU)."""

from __future__ import annotations

import subprocess
import sys

from helpers import REPO, cockpit_env

SHORT = ("--", "--epochs", "1", "--steps-per-epoch", "8")


def cockpit(runs, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=300, env=cockpit_env(NO_COLOR="1", COCKPIT_RUNS_DIR=str(runs)))


def test_quiet_success_has_no_rank_line_and_its_summary(tmp_path):
    r = cockpit(tmp_path, "run", "jobs/demo.yaml", "-q", *SHORT)
    assert r.returncode == 0, r.stdout + r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("== demo (demo-") and "succeeded in " in first and "exit code 0" in first, r.stdout
    assert not [line for line in r.stdout.splitlines() if line.startswith("[")], r.stdout  # no [host:rank] line
    assert "started (supervisor pid" in r.stderr


# A quiet failure (summary first, notes as they happen, the job's exit code): test_runs_e2e's
# test_raising_rank_is_named_with_its_traceback_and_nothing_is_left checks it on its -q run.


# A quiet healed run keeping its whole summary: test_heal_local's
# test_a_raise_is_healed_from_the_last_checkpoint_and_accounted runs jobs/demo-heal.yaml -q and checks it.
