"""The supervisor's Slurm nodes against a scripted Slurm (squeue lines in the shape of fixtures/squeue.txt):
what status.json says at each step, cancel and its retry, a job that vanishes, and sweeps' trial statuses."""

from __future__ import annotations

import subprocess
from dataclasses import replace

import yaml

from cockpit.launch.slurm import job as slurm
from cockpit.launch.slurm.unit import GIVE_UP_AFTER_STOP, MISSES_BEFORE_LOST, make_slurm_nodes
from cockpit.run.store import read_status
from cockpit.spec.model import load_spec


class ScriptedSlurm:
    """squeue answers from ``lines`` (job id -> squeue line, or absent); scancel succeeds unless ``refuse``."""

    def __init__(self):
        self.lines: dict[str, str] | None = {}  # None: the controller does not answer
        self.calls: list[list[str]] = []
        self.refuse = False

    def __call__(self, argv):
        self.calls.append(argv)
        if argv[0] == "squeue" and self.lines is None:
            return subprocess.CompletedProcess(argv, 1, "", "slurm_load_jobs error: Unable to contact slurm controller")
        if argv[0] == "squeue":
            return subprocess.CompletedProcess(argv, 0, "".join(v + "\n" for v in self.lines.values()), "")
        if argv[0] == "scancel":
            if self.refuse or self.lines is None:
                return subprocess.CompletedProcess(argv, 1, "", "scancel: error: Unable to contact slurm controller")
            return subprocess.CompletedProcess(argv, 0, "", "")
        if argv[:3] == ["scontrol", "show", "config"]:
            return subprocess.CompletedProcess(argv, 0, "JobCompType = jobcomp/none\n", "")
        raise AssertionError(f"unexpected command {argv}")

    def scancels(self) -> list[list[str]]:
        return [c for c in self.calls if c[0] == "scancel"]


def submitted(tmp_path, sweep: bool = False, job_id: str = "21"):
    job = {"name": "j", "script": "train.py", "launcher": "slurm", "nodes": 1}
    if sweep:
        job["sweep"] = {"grid": {"lr": [0.1, 0.2]}}
    path = tmp_path / "j.yaml"
    path.write_text(yaml.safe_dump(job))
    run_dir = slurm.prepare(load_spec(path), str(path), tmp_path / "runs")
    status = read_status(run_dir)
    status.nodes = [replace(n, slurm=replace(n.slurm, job_id=f"{job_id}_{n.trial.index}", array_job_id=job_id)
                            if sweep else replace(n.slurm, job_id=job_id)) for n in status.nodes]
    return run_dir, status


def test_a_job_from_queue_to_end(tmp_path):
    run_dir, status = submitted(tmp_path)
    fake = ScriptedSlurm()
    fake.lines["21"] = "21|PENDING|Resources|0|0||"
    [node] = make_slurm_nodes(status, run_dir, fake, min_interval=0)
    assert node.poll() is None
    on_disk = read_status(run_dir)
    assert on_disk.state == "starting"
    assert on_disk.note == "Slurm job 21 PENDING (waiting in the queue; reason Resources)"
    assert on_disk.nodes[0].slurm.reason == "Resources"
    fake.lines["21"] = "21|RUNNING|None|0|0|n[3-4]|"
    assert node.poll() is None
    on_disk = read_status(run_dir)
    assert (on_disk.state, on_disk.hosts, on_disk.note) == ("running", ["n3", "n4"], "Slurm job 21 RUNNING on n[3-4]")
    fake.lines["21"] = "21|TIMEOUT|TimeLimit|36608|0|n[3-4]|"
    assert node.poll() == 143
    assert read_status(run_dir).note == "Slurm job 21 TIMEOUT (killed at its time limit), reason TimeLimit"
    assert len([c for c in fake.calls if c[0] == "squeue"]) == 3  # one call per refresh, none after the end
    node.poll()
    assert len([c for c in fake.calls if c[0] == "squeue"]) == 3


def test_cancel_once_and_retry_until_scancel_works(tmp_path):
    run_dir, status = submitted(tmp_path)
    fake = ScriptedSlurm()
    fake.lines["21"] = "21|RUNNING|None|0|0|n1|"
    [node] = make_slurm_nodes(status, run_dir, fake, min_interval=0)
    node.poll()
    fake.refuse = True
    node.terminate()
    assert "could not cancel yet (retrying)" in read_status(run_dir).note
    fake.refuse = False
    node.poll()
    node.terminate()  # already cancelled: not again
    node.poll()
    assert fake.scancels() == [["scancel", "21"], ["scancel", "21"]]


def test_cancelled_outside_cockpit_ends_stopped(tmp_path):
    run_dir, status = submitted(tmp_path)
    fake = ScriptedSlurm()
    fake.lines["21"] = "21|CANCELLED|None|36608|0|n1|"
    [node] = make_slurm_nodes(status, run_dir, fake, min_interval=0)
    assert node.poll() == 143
    assert status.stop_requested  # so the supervisor ends the run "stopped", as Slurm says
    node.terminate()
    assert fake.scancels() == []  # nothing left to cancel


def test_a_job_slurm_forgot_is_ended_from_the_rank_exits(tmp_path):
    run_dir, status = submitted(tmp_path)
    fake = ScriptedSlurm()
    fake.lines["21"] = "21|RUNNING|None|0|0|n1|"
    [node] = make_slurm_nodes(status, run_dir, fake, min_interval=0)
    node.poll()
    for rank in (0, 1):
        (run_dir / "logs" / f"rank-{rank}.n1.exit").write_text("0 1.5\n")
    del fake.lines["21"]
    codes = [node.poll() for _ in range(MISSES_BEFORE_LOST)]
    assert codes[:-1] == [None] * (MISSES_BEFORE_LOST - 1) and codes[-1] == 0
    assert "no longer reports job 21" in read_status(run_dir).note


def test_sweep_trials_share_one_squeue_call_and_keep_their_own_status(tmp_path):
    run_dir, status = submitted(tmp_path, sweep=True)
    fake = ScriptedSlurm()
    fake.lines = {"21_0": "21_0|RUNNING|None|0|0|n1|", "21_1": "21_1|PENDING|JobArrayTaskLimit|0|0||"}
    now = [0.0]
    nodes = make_slurm_nodes(status, run_dir, fake, clock=lambda: now[0])
    assert [n.poll() for n in nodes] == [None, None]
    assert len(fake.calls) == 1 and "--jobs=21" in fake.calls[0]
    assert read_status(run_dir / "trial-0").state == "running"
    assert "reason JobArrayTaskLimit" in read_status(run_dir / "trial-1").note
    assert read_status(run_dir).note == "sweep of 2 trials, Slurm array job 21: running 1, starting 1"
    fake.lines = {"21_0": "21_0|COMPLETED|None|0|0|n1|", "21_1": "21_1|FAILED|NonZeroExitCode|256|0|n2|"}
    now[0] += 1
    codes = [n.poll() for n in nodes]
    assert codes == [0, 1]
    assert [read_status(run_dir / f"trial-{i}").state for i in (0, 1)] == ["succeeded", "failed"]
    assert read_status(run_dir).note == "sweep of 2 trials, Slurm array job 21: failed 1, succeeded 1"
    nodes[1].terminate()
    assert fake.scancels() == []


def test_a_stop_gives_up_when_slurm_stays_silent(tmp_path):
    run_dir, status = submitted(tmp_path)
    fake = ScriptedSlurm()
    fake.lines["21"] = "21|RUNNING|None|0|0|n1|"
    now = [0.0]
    [node] = make_slurm_nodes(status, run_dir, fake, clock=lambda: now[0])
    node.poll()
    fake.lines = None  # the controller is gone: squeue fails from now on
    node.terminate()
    assert node.poll() is None
    now[0] = GIVE_UP_AFTER_STOP + 60
    assert node.poll() == 1
    assert "no answer from Slurm" in read_status(run_dir).note and "may still be queued" in status.note


def test_a_job_that_requeues_itself_is_not_over_while_it_passes_through_an_end_state(tmp_path):
    """scontrol requeue: the job shows FAILED (its batch shell killed "due to job requeue") for a moment on
    its way back to PENDING; only an end that holds REQUEUE_SETTLE seconds ends the run."""
    from cockpit.launch.slurm.unit import REQUEUE_SETTLE

    job = {"name": "j", "script": "train.py", "launcher": "slurm", "nodes": 1, "slurm": {"requeue": True}}
    path = tmp_path / "j.yaml"
    path.write_text(yaml.safe_dump(job))
    run_dir = slurm.prepare(load_spec(path), str(path), tmp_path / "runs")
    status = read_status(run_dir)
    status.nodes[0] = replace(status.nodes[0], slurm=replace(status.nodes[0].slurm, job_id="21"))
    fake, now = ScriptedSlurm(), [0.0]
    fake.lines["21"] = "21|RUNNING|None|0|0|n1|"
    [node] = make_slurm_nodes(status, run_dir, fake, min_interval=0, clock=lambda: now[0])
    assert node.poll() is None
    fake.lines["21"] = "21|FAILED|NonZeroExitCode|256|0|n1|"
    assert node.poll() is None
    now[0] += 20.0  # past the tracker's longest backoff: the next poll asks squeue
    fake.lines["21"] = "21|PENDING|BeginTime|0|1||"
    assert node.poll() is None and read_status(run_dir).state == "starting"
    now[0] += 60.0
    fake.lines["21"] = "21|COMPLETED|None|0|1|n1|"
    assert node.poll() is None  # seen once: not yet believed
    now[0] += REQUEUE_SETTLE
    assert node.poll() == 0
    assert read_status(run_dir).nodes[0].slurm.restarts == 1


def _batch_log(run_dir, *lines):
    from cockpit.run import layout

    log = layout.agent_log(run_dir, "sbatch")
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as f:
        f.writelines(line + "\n" for line in lines)


def _running(tmp_path):
    """A submitted job's unit that saw it RUNNING after its first start line: (run_dir, squeue, clock, unit)."""
    run_dir, status = submitted(tmp_path)
    fake, now = ScriptedSlurm(), [0.0]
    _batch_log(run_dir, "cockpit: start restart=0 job=21 nodes=n1 time=1795000000")
    fake.lines["21"] = "21|RUNNING|None|0|0|n1|"
    [node] = make_slurm_nodes(status, run_dir, fake, min_interval=0, clock=lambda: now[0])
    assert node.poll() is None
    return run_dir, fake, now, node


REQUEUE_LINE = "slurmstepd-n1: error: *** JOB 21 ON n1 CANCELLED AT 2026-11-27T18:02:11 DUE TO JOB REQUEUE ***"


def test_a_requeue_whose_failed_state_holds_with_the_count_already_raised_is_not_the_end(tmp_path):
    """The sequence squeue showed in a failed run of the real requeue test, under load: slurmstepd's 'DUE TO JOB
    REQUEUE' in the batch log, then FAILED (NonZeroExitCode) with restarts already 1 for over REQUEUE_SETTLE,
    then PENDING, then the next start. The run went on to succeed; cockpit had ended it FAILED after 5 s."""
    from cockpit.launch.slurm.unit import REQUEUE_ASKED_SETTLE, REQUEUE_SETTLE

    run_dir, fake, now, node = _running(tmp_path)
    assert REQUEUE_SETTLE < 80.0 < REQUEUE_ASKED_SETTLE
    for restart in (1, 2):  # a second requeue of the same job passes the same way
        _batch_log(run_dir, REQUEUE_LINE)
        fake.lines["21"] = f"21|COMPLETING|None|0|{restart - 1}|n1|"  # the attempt ending: not back in the queue
        assert node.poll() is None
        now[0] += 1.0
        fake.lines["21"] = f"21|FAILED|NonZeroExitCode|256|{restart}|n1|"
        for _ in range(4):  # 4 x 20 s: well past REQUEUE_SETTLE, within REQUEUE_ASKED_SETTLE
            assert node.poll() is None, restart
            now[0] += 20.0
        assert node.describe().state != "failed"
        fake.lines["21"] = f"21|PENDING|BeginTime|0|{restart}||"
        assert node.poll() is None and read_status(run_dir).state == "starting"
        now[0] += 20.0
        _batch_log(run_dir, f"cockpit: start restart={restart} job=21 nodes=n1 time={1795000130 + restart}")
        fake.lines["21"] = f"21|RUNNING|None|0|{restart}|n1|"
        assert node.poll() is None
        now[0] += 20.0
    fake.lines["21"] = "21|COMPLETED|None|0|2|n1|"  # no #SBATCH --requeue, no requeue since the start: the end
    assert node.poll() == 0 and read_status(run_dir).nodes[0].slurm.restarts == 2


def test_a_requeued_job_cancelled_while_queued_again_ends_after_the_short_settle(tmp_path):
    """An outside scancel of the requeued, pending job: CANCELLED with the raised count, after PENDING (or even
    with PENDING unseen: a cancel is no requeue passing). The run ends within REQUEUE_SETTLE, not 180 s."""
    from cockpit.launch.slurm.unit import REQUEUE_SETTLE

    for seen_pending in (True, False):
        (tmp_path / str(seen_pending)).mkdir()
        run_dir, fake, now, node = _running(tmp_path / str(seen_pending))
        _batch_log(run_dir, REQUEUE_LINE)
        if seen_pending:
            fake.lines["21"] = "21|PENDING|BeginTime|0|1||"
            assert node.poll() is None
            now[0] += 20.0
        fake.lines["21"] = "21|CANCELLED|None|0|1||"
        assert node.poll() is None
        now[0] += REQUEUE_SETTLE
        assert node.poll() is not None, seen_pending
        assert node.describe().slurm.slurm_state == "CANCELLED"


def test_a_requeue_whose_failed_state_shows_after_pending_is_not_the_end(tmp_path):
    """The sequence supervisor.log traced in a failed run of the real requeue test (11-28, the suite under
    load): 'DUE TO JOB REQUEUE', COMPLETING with restarts 1, PENDING (BeginTime), then FAILED (NonZeroExitCode):
    the old attempt's end showing after the job was queued again. cockpit had ended the run FAILED after 5 s."""
    from cockpit.launch.slurm.unit import REQUEUE_ASKED_SETTLE, REQUEUE_SETTLE

    run_dir, fake, now, node = _running(tmp_path)
    _batch_log(run_dir, REQUEUE_LINE)
    for line in ("21|COMPLETING|None|0|1|n1|", "21|PENDING|BeginTime|0|1||", "21|FAILED|NonZeroExitCode|256|1|n1|"):
        fake.lines["21"] = line
        assert node.poll() is None
        now[0] += 1.0
    for _ in range(4):  # 4 x 20 s: well past REQUEUE_SETTLE, within REQUEUE_ASKED_SETTLE
        now[0] += 20.0
        assert node.poll() is None
    assert REQUEUE_SETTLE < 80.0 < REQUEUE_ASKED_SETTLE and node.describe().state != "failed"
    _batch_log(run_dir, "cockpit: start restart=1 job=21 nodes=n1 time=1795000131")
    fake.lines["21"] = "21|RUNNING|None|0|1|n1|"
    assert node.poll() is None and node.describe().state == "running"
    now[0] += 20.0
    fake.lines["21"] = "21|COMPLETED|None|0|1|n1|"  # no #SBATCH --requeue, no requeue since the start: the end
    assert node.poll() == 0


def test_a_job_requeued_then_failing_once_allocated_again_ends_after_the_short_settle(tmp_path):
    """Allocated again after the requeue (RUNNING with the raised count), then FAILED before any start line
    (e.g. the batch script could not start): the requeue has passed, so this end is believed after
    REQUEUE_SETTLE."""
    from cockpit.launch.slurm.unit import REQUEUE_SETTLE

    run_dir, fake, now, node = _running(tmp_path)
    _batch_log(run_dir, REQUEUE_LINE)
    fake.lines["21"] = "21|PENDING|BeginTime|0|1||"
    assert node.poll() is None
    now[0] += 20.0
    fake.lines["21"] = "21|RUNNING|None|0|1|n1|"
    assert node.poll() is None
    now[0] += 1.0
    fake.lines["21"] = "21|FAILED|NonZeroExitCode|256|1|n1|"
    assert node.poll() is None
    now[0] += REQUEUE_SETTLE
    assert node.poll() == 1 and node.describe().state == "failed"
