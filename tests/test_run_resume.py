"""`cockpit run --resume RUN` (issue 33 item 5): a stopped local run goes on in its own directory as its next
attempt, from its last checkpoint; a run that still runs, is another user's, succeeded, is not local or lost its
job.yaml is refused (exit 2, a hint). The decision and the directory's preparation on their own; the refusals
through real `cockpit` processes over run directories made here; one real run stopped and resumed (torch, gloo
on CPU)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env, wait_for

from cockpit import contract
from cockpit.cli.main import COMMANDS
from cockpit.launch import registry, resume
from cockpit.run import layout
from cockpit.run.store import RunStatus, create_run_dir, read_status, write_status

OK = resume.Facts(has_job=True, has_script=True, alive=0)


def status(state: str = "stopped", **fields) -> RunStatus:
    return RunStatus(**{**dict(run_id="demo-1", name="demo", launcher="local", job_file="/w/demo.yaml",
                               hosts=["vm"], world_size=2, state=state, created=100.0, started=101.0,
                               ended=160.0, exit_code=130), **fields})


@pytest.mark.parametrize(("st", "found", "words"), [
    (status("running"), OK, "it is running"),
    (status("starting"), OK, "it is starting"),
    (status("stopped"), resume.Facts(True, True, alive=3), "3 of its processes still run"),
    (status("succeeded"), OK, "nothing to continue"),
    (status("failed", launcher="slurm"), OK, "cockpit run /w/demo.yaml submits it again"),
    (status("failed", launcher="slurm"), OK, "R in the TUI's run view: cockpit --run demo-1"),
    (status("stopped"), resume.Facts(has_job=False, has_script=True, alive=0), "no job.yaml"),
    (status("stopped"), resume.Facts(has_job=True, has_script=False, alive=0), "no commands/node-0.sh"),
])
def test_a_run_that_cannot_go_on_is_refused_with_a_hint(st, found, words):
    why = resume.refusal(st, found)
    assert why is not None and words in why and "hint:" in why


@pytest.mark.parametrize("launcher", [k for k in sorted(registry.LAUNCHERS) if registry.get(k).resume_instead])
def test_the_hint_for_a_run_resumed_elsewhere_names_commands_that_exist(launcher):
    """A user types the hint as given: each `cockpit WORD` in it is one of cockpit's commands (a Slurm run's
    hint once named `cockpit requeue`, which never existed: "invalid choice")."""
    why = resume.refusal(status("failed", launcher=launcher), OK)
    assert why is not None and "hint: cockpit " in why
    assert set(re.findall(r"cockpit (\w+)", why)) <= set(COMMANDS), why


@pytest.mark.parametrize("state", ["stopped", "failed", "lost"])
def test_a_stopped_failed_or_lost_local_run_may_go_on(state):
    assert resume.refusal(status(state), OK) is None


def _stopped_run(runs: Path) -> Path:
    run_dir = create_run_dir(runs, "demo-1")
    shutil.copyfile(REPO / "jobs" / "demo.yaml", run_dir / layout.JOB)
    (run_dir / layout.LOGS).mkdir(mode=0o700, exist_ok=True)
    for rank in (0, 1):
        layout.rank_file(run_dir, rank, "vm", "log").write_text("step 30\n")
        layout.rank_file(run_dir, rank, "vm", "exit").write_text("143 150.0\n")
    (run_dir / layout.STOP).write_text('{"grace": 10, "by": "cockpit stop"}\n')
    write_status(run_dir, status("stopped", stop_requested=True, stopped_at=150.0, note="stopped by cockpit stop"))
    return run_dir


def test_the_next_attempt_sets_the_last_aside_and_marks_every_log(tmp_path):
    run_dir = _stopped_run(tmp_path)
    new = resume.prepare(run_dir, read_status(run_dir), now=200.0)
    assert (new.state, new.started, new.stop_requested, new.ranks, new.note) == ("starting", 101.0, False, {}, None)
    assert [(a.attempt, a.started, a.ended, a.end) for a in new.attempts] == [(0, 101.0, 160.0, "stopped")]
    aside = run_dir / layout.LOGS / "attempt-0"
    assert sorted(p.name for p in aside.iterdir()) == sorted([layout.STOP, "rank-0.vm.exit", "rank-1.vm.exit"])
    assert not (run_dir / layout.STOP).exists() and not list((run_dir / layout.LOGS).glob("*.exit"))
    log = layout.rank_file(run_dir, 1, "vm", "log").read_text().splitlines()
    assert log[-1].startswith(f"{contract.ATTEMPT_MARK}1 (COCKPIT_ATTEMPT=1)"), log
    assert read_status(run_dir) == new
    assert resume.next_attempt(new) == 1  # the supervisor appends attempt 1 to the list as it starts it


def cockpit(runs: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout, env=cockpit_env(NO_COLOR="1", COCKPIT_RUNS_DIR=str(runs)))


def refused(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "hint:" in r.stderr, r.stderr
    for word in words:
        assert word in r.stderr, r.stderr


def test_the_cli_refuses_a_succeeded_run_one_with_no_job_and_extra_arguments(tmp_path):
    run_dir = _stopped_run(tmp_path)
    refused(cockpit(tmp_path, "run", "--resume", "demo-1", "--", "--epochs", "2"), "takes no job file")
    layout.node_script(run_dir, 0).parent.mkdir(exist_ok=True)
    layout.node_script(run_dir, 0).write_text("exit 0\n")
    (run_dir / layout.JOB).unlink()
    refused(cockpit(tmp_path, "run", "--resume", "demo-1"), "has no job.yaml")
    write_status(run_dir, status("succeeded", exit_code=0))
    refused(cockpit(tmp_path, "run", "--resume", "demo-1"), "succeeded")
    refused(cockpit(tmp_path, "run"), "--resume RUN")


def test_the_cli_refuses_another_users_run(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    run_dir = _stopped_run(tmp_path)
    os.chown(run_dir, 65534, 65534)
    refused(cockpit(tmp_path, "run", "--resume", "demo-1"), "does not resume a run of another user")


# A plain script (no torch in the rank: two starts under torchrun stay short) that keeps its own checkpoint in the
# run directory, as cockpit.train does, and saves it when the stop's SIGTERM comes.
SCRIPT = """\
import os, signal, sys, time
path = os.path.join(os.environ["COCKPIT_RUN_DIR"], "step.txt")
step = int(open(path).read()) if os.path.exists(path) else 0
print(f"attempt {os.environ['COCKPIT_ATTEMPT']} resumed from {step}", flush=True)
# the first attempt runs until it is stopped; a resumed one goes 10 steps further
end = step + 10 if int(os.environ["COCKPIT_ATTEMPT"]) else float("inf")
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
while step < end and not stop:
    time.sleep(0.1)
    step += 1
    with open(path + ".new", "w") as f:
        f.write(str(step))
    os.replace(path + ".new", path)
print(f"ended at {step}", flush=True)
"""


def test_a_real_run_stopped_then_resumed_goes_on_from_its_checkpoint(tmp_path):
    runs = tmp_path / "runs"
    (tmp_path / "count.py").write_text(SCRIPT)
    (tmp_path / "count.yaml").write_text("name: count\nscript: count.py\nlauncher: local\ngpus: none\n"
                                         "procs_per_node: 1\n")
    r = cockpit(runs, "run", str(tmp_path / "count.yaml"), "-d")
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.strip()
    saved = runs / run_id / "step.txt"
    wait_for(lambda: saved.exists() and int(saved.read_text() or 0) >= 3, 120, "the script's 3rd step")
    refused(cockpit(runs, "run", "--resume", run_id), "cannot be resumed", f"cockpit stop {run_id}")
    assert cockpit(runs, "stop", run_id).returncode == 0
    stopped_at = int(saved.read_text())
    r = cockpit(runs, "run", "--resume", run_id, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"attempt 1 resumed from {stopped_at}" in r.stdout and f"ended at {stopped_at + 10}" in r.stdout, r.stdout
    assert "attempt 0 resumed" not in r.stdout  # the first attempt's lines are not streamed again
    assert "succeeded in" in r.stdout and "attempts: 2" in r.stdout, r.stdout
    st = json.loads((runs / run_id / layout.STATUS).read_text())
    assert [a["end"] for a in st["attempts"]] == ["stopped", "succeeded"], st["attempts"]
    # the time between the stop and the resume is the person's pause: said apart, out of the goodput's wall time
    assert st["attempts"][1].get("resumed") is True and "resumed" not in st["attempts"][0], st["attempts"]
    assert "stopped (by user): " in r.stdout, r.stdout
    assert (runs / run_id / layout.LOGS / "attempt-0" / layout.STOP).exists()
