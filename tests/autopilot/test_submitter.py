"""A run handed to sbatch by a cockpit that was killed before sbatch answered (cockpit.launch.submitter,
cockpit.launch.slurm.job's reconcile): unsubmitted as soon as that cockpit is certainly gone, never `starting`
for ever. The real scenario (slurmctld stopped, cockpit SIGKILLed) is tests/slurm/test_slurm_slow_client.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from cockpit.launch import procs, submitter
from cockpit.launch.slurm.job import SUBMIT_WITHIN, _never_submitted, reconcile
from cockpit.run.records import NodeRecord, SlurmJob
from cockpit.run.store import RunStatus, read_status, write_status

HOST = "login1"


def _alive(pid: int, start: str | None) -> bool:
    return (pid, start) == (42, "1000")


def test_the_verdict_on_a_recorded_submitter():
    rec = {"pid": 42, "start": "1000", "host": HOST, "boot": "b1"}
    assert submitter.verdict(rec, HOST, "b1", _alive) is False  # it runs
    assert submitter.verdict({**rec, "start": "999"}, HOST, "b1", _alive) is True  # the pid was reused
    assert submitter.verdict({**rec, "pid": 43}, HOST, "b1", _alive) is True  # gone
    assert submitter.verdict(rec, HOST, "b2", _alive) is True  # rebooted since: whatever runs as 42 now
    assert submitter.verdict(rec, "login2", "b1", _alive) is None  # another host's process: cannot tell
    assert submitter.verdict({"pid": True, "host": HOST}, HOST, "b1", _alive) is None  # no pid


def test_this_process_is_found_alive_and_a_dead_one_gone():
    me = submitter.this_process()
    assert (me["pid"], me["host"]) == (os.getpid(), socket.gethostname())
    assert me["start"] == procs.start_time(os.getpid())
    assert submitter.gone(me) is False
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    rec = {**me, "pid": child.pid, "start": procs.start_time(child.pid)}
    child.wait()
    assert submitter.gone(rec) is True
    assert submitter.gone(None) is None


def _slurm_run(tmp_path, sub: dict | None, job_id: str | None = None, created: float = 1000.0):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    status = RunStatus(run_id="r1", name="job", launcher="slurm", job_file="job.yaml", hosts=[], world_size=2,
                       created=created, submitter=sub,
                       nodes=[NodeRecord("sbatch", 0, slurm=SlurmJob(job_id), null_keys=frozenset({"job_id"}))])
    write_status(run_dir, status)
    return run_dir, status


def test_a_run_whose_submitter_was_killed_is_unsubmitted_and_written(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    dead = {**submitter.this_process(), "pid": child.pid, "start": procs.start_time(child.pid)}
    child.wait()
    run_dir, status = _slurm_run(tmp_path, dead)
    out = reconcile(run_dir, status, {})
    assert out.state == "unsubmitted" and f"pid {child.pid}" in (out.note or "") and out.exit_code == 1
    assert read_status(run_dir).state == "unsubmitted"


def test_a_live_submitter_keeps_its_run_starting(tmp_path):
    run_dir, status = _slurm_run(tmp_path, submitter.this_process())
    assert reconcile(run_dir, status, {}).state == "starting"


def test_a_submitter_that_cannot_be_looked_at_counts_after_the_time_sbatch_is_given(tmp_path):
    other = {"pid": 42, "start": "1", "host": "not-" + socket.gethostname(), "boot": "x"}
    run_dir, status = _slurm_run(tmp_path, other, created=1000.0)
    assert _never_submitted(run_dir, status, now=1000.0 + SUBMIT_WITHIN - 1).state == "starting"
    out = _never_submitted(run_dir, status, now=1000.0 + SUBMIT_WITHIN + 1)
    assert out.state == "unsubmitted" and f"within {SUBMIT_WITHIN:.0f} s" in (out.note or "")


def test_a_run_with_a_job_id_is_followed_from_slurm_not_called_unsubmitted(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    dead = {**submitter.this_process(), "pid": child.pid, "start": procs.start_time(child.pid)}
    child.wait()
    run_dir, status = _slurm_run(tmp_path, dead, job_id="77")
    assert reconcile(run_dir, status, {}).state == "starting"  # Slurm said nothing of job 77 yet: as it was


def test_a_local_run_whose_cockpit_died_before_its_supervisor_is_lost_not_starting(tmp_path):
    """A local run has no sbatch wait: its cockpit starts the supervisor right after making the run. Killed in
    between, the run has no supervisor and no rank ran: after the start allowance it reads lost, saying so."""
    from cockpit.launch import prepare
    from cockpit.launch.supervision import NEVER_SUPERVISED
    from cockpit.launch.supervision import reconcile as reconcile_local
    from cockpit.spec.model import load_spec

    path = tmp_path / "job.yaml"
    path.write_text(f"name: early\nscript: {tmp_path / 'train.py'}\nlauncher: local\ngpus: none\n")
    (tmp_path / "train.py").write_text("print('never runs')\n")
    run_dir = prepare(load_spec(path), str(path), tmp_path / "runs")
    status = read_status(run_dir)
    assert reconcile_local(run_dir, status).state == "starting"  # within the allowance: its supervisor may come
    out = reconcile_local(run_dir, read_status(run_dir), started_within=0.0)
    assert (out.state, out.note) == ("lost", NEVER_SUPERVISED)
    assert read_status(run_dir).state == "lost"


def test_diagnose_works_out_a_run_left_starting_by_a_killed_submitter(tmp_path):
    """`cockpit diagnose RUN` of a Slurm run whose submitting cockpit was killed before sbatch answered: the run is
    worked out first (as ps does), and the diagnosis says it was never submitted (no log says anything)."""
    from helpers import REPO, cockpit_env

    from cockpit.launch.slurm.job import prepare as prepare_slurm
    from cockpit.spec.model import load_spec

    path = tmp_path / "job.yaml"
    path.write_text(f"name: dg\nscript: {REPO / 'jobs' / 'demo.py'}\nlauncher: slurm\nnodes: 1\ngpus: none\n")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    dead = {**submitter.this_process(), "pid": child.pid, "start": procs.start_time(child.pid)}
    child.wait()
    run_dir = prepare_slurm(load_spec(path), str(path), tmp_path / "runs")
    status = read_status(run_dir)
    status.submitter = dead
    write_status(run_dir, status)
    r = subprocess.run([sys.executable, "-m", "cockpit", "diagnose", "--json", run_dir.name], capture_output=True,
                       text=True, cwd=REPO, env=cockpit_env(COCKPIT_RUNS_DIR=str(tmp_path / "runs")), timeout=60)
    [finding] = json.loads(r.stdout)["findings"]
    assert finding["code"] == "unsubmitted" and f"pid {child.pid}" in finding["title"], r.stdout + r.stderr
    assert read_status(run_dir).state == "unsubmitted"
