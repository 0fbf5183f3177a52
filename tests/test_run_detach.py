"""`cockpit run --detach` as sbatch / `docker run -d`: the run id alone on stdout, how to follow and stop it on
stderr, exit 0 at once; the run goes on without the command and `attach` later gives its end and its exit code.
Real local runs of jobs/demo.yaml (torch, gloo on CPU)."""

from __future__ import annotations

import subprocess
import sys

from helpers import REPO, cockpit_env, wait_for

from cockpit.run.store import read_status


def cockpit(runs, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=300, env=cockpit_env(NO_COLOR="1", COCKPIT_RUNS_DIR=str(runs)))


def test_detach_returns_with_the_id_and_the_run_goes_on(tmp_path):
    r = cockpit(tmp_path, "run", "--detach", "jobs/demo.yaml", "--", "--epochs", "1", "--steps-per-epoch", "400",
                "--fail-rank", "1", "--fail-step", "300")
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.strip()
    assert r.stdout == run_id + "\n" and run_id.startswith("demo-"), r.stdout
    for hint in (f"cockpit attach {run_id}", f"cockpit logs -f {run_id}", f"cockpit stop {run_id}"):
        assert hint in r.stderr, r.stderr
    run_dir = tmp_path / run_id
    status = read_status(run_dir)
    assert status is not None and not status.final  # returned while the run goes on
    final = wait_for(lambda: (s := read_status(run_dir)) is not None and s.final and s, 240, "the run to end")
    assert final.state == "failed" and final.first_failure.rank == 1
    later = cockpit(tmp_path, "attach", run_id)
    assert later.returncode == 1 and "first failure: rank 1 on" in later.stdout, later.stdout + later.stderr


def test_detach_with_a_bad_job_is_still_an_error(tmp_path):
    job = tmp_path / "bad.yaml"
    job.write_text("name: bad\nscript: nope.py\nlauncher: local\ngpus: none\n")
    r = cockpit(tmp_path, "run", "--detach", str(job))
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr, r.stderr
