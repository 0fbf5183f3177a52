"""`cockpit run | ps | logs | attach | stop` on the test Slurm cluster (tests/slurm/cluster.py): real sbatch,
srun, squeue, scancel and requeue; the ranks are the demo (or requeue_train.py) on CPU with gloo."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers import JOBS, REPO, wait_for

from cockpit.launch import dry_run_facts, procs
from cockpit.render import render
from cockpit.run.store import list_runs, read_status
from cockpit.slurm import query as slurm_query
from cockpit.slurm.command import SlurmError
from cockpit.spec.model import load_spec

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent
_SPAWNED: list[subprocess.Popen] = []  # cockpit processes started in the background by the current test
SMALL = ["--epochs", "1", "--steps-per-epoch", "10", "--hidden", "32", "--layers", "1", "--batch-size", "16"]
# The in-allocation preflight (one srun step per node, a torch import each) is checked in test_alloc_preflight.py
# and stays on in the demo and sweep runs here; the tests of other things leave it out (`slurm.preflight: false`):
# on a loaded 2-core machine each torch import costs seconds on the serialized Slurm group's critical path.
NO_PREFLIGHT = {"preflight": False}


def write_job(tmp_path: Path, name: str, *, script: Path = REPO / "jobs" / "demo.py", args=SMALL, nodes=2,
              procs_per_node=2, slurm: dict | None = None, sweep: dict | None = None) -> Path:
    job = {"name": name, "script": str(script), "args": list(args), "launcher": "slurm", "nodes": nodes,
           "procs_per_node": procs_per_node, "gpus": "none", "python": sys.executable}
    if slurm:
        job["slurm"] = slurm
    if sweep:
        job["sweep"] = sweep
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


@pytest.fixture
def runs(tmp_path):
    """The runs directory of one test; afterwards, no cockpit or supervisor of it is left running (a failed
    test would leave them polling a cluster that is about to stop)."""
    path = tmp_path / "runs"
    yield path
    for proc in _SPAWNED:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    for _, status in list_runs(path) if path.is_dir() else []:
        sup = status.supervisor
        if sup and procs.is_alive(sup["pid"], sup.get("start")):
            os.kill(sup["pid"], signal.SIGTERM)  # it cancels the job and records the end
            deadline = time.monotonic() + 30
            while procs.is_alive(sup["pid"], sup.get("start")) and time.monotonic() < deadline:
                time.sleep(0.2)
            if procs.is_alive(sup["pid"], sup.get("start")):
                os.kill(sup["pid"], signal.SIGKILL)
    _SPAWNED.clear()


def env_for(cluster, runs: Path) -> dict[str, str]:
    return {**cluster.env, "COCKPIT_RUNS_DIR": str(runs), "NO_COLOR": "1"}


def cockpit(cluster, runs: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=REPO,
                          env=env_for(cluster, runs), timeout=timeout)


def start_cockpit(cluster, runs: Path, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", *args], cwd=REPO, env=env_for(cluster, runs),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _SPAWNED.append(proc)
    return proc


def only_run(runs: Path):
    [(run_dir, status)] = list_runs(runs)
    return run_dir, status


def read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def rank0_log(run_dir: Path) -> str:
    return "".join(read(p) for p in (run_dir / "logs").glob("rank-0.*.log"))


def job_id_of(run_dir: Path) -> str:
    return wait_for(lambda: (s := read_status(run_dir)) and s.nodes and s.nodes[0].slurm.job_id, 30, "a job id")


def test_demo_on_two_nodes_runs_and_reads_like_a_local_run(slurm_cluster, tmp_path, runs):
    r = cockpit(slurm_cluster, runs, "run", str(write_job(tmp_path, "demo2x2")))
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir, status = only_run(runs)
    assert (status.state, status.exit_code, status.hosts, status.world_size) == ("succeeded", 0, ["n1", "n2"], 4)
    logs = sorted(p.name for p in (run_dir / "logs").glob("rank-*.log"))
    assert logs == ["rank-0.n1.log", "rank-1.n1.log", "rank-2.n2.log", "rank-3.n2.log"]
    for rank, host in enumerate(["n1", "n1", "n2", "n2"]):
        assert f"[{host}:{rank}] [cockpit] start rank={rank} world=4 local_rank={rank % 2}" in r.stdout
        assert f"[{host}:{rank}] [cockpit] finish rank={rank} step=10 exit_code=0" in r.stdout
    [node] = status.nodes
    assert (node.slurm.slurm_state, node.slurm.restarts, node.slurm.nodes) == ("COMPLETED", 0, "n[1-2]")
    assert f"== demo2x2 ({status.run_id}): succeeded in" in r.stdout
    assert f"note: Slurm job {node.slurm.job_id} COMPLETED" in r.stdout
    assert f"master=n1:{12000 + int(node.slurm.job_id) % 20000}" in read(run_dir / "logs/agent.sbatch.log")
    assert node.slurm.job_id not in slurm_cluster.queue()

    ps = json.loads(cockpit(slurm_cluster, runs, "ps", "--json").stdout)["runs"]
    assert [(p["state"], p["launcher"]) for p in ps] == [("succeeded", "slurm")]
    last = cockpit(slurm_cluster, runs, "logs", "last", "-n", "1").stdout.splitlines()
    assert last == [f"[{h}:{k}] [cockpit] finish rank={k} step=10 exit_code=0"
                    for k, h in enumerate(["n1", "n1", "n2", "n2"])]
    attach = cockpit(slurm_cluster, runs, "attach", "last")
    assert attach.returncode == 0 and f"== demo2x2 ({status.run_id}): succeeded" in attach.stdout


def test_failing_rank_is_named_and_kill_on_bad_exit_ends_the_others(slurm_cluster, tmp_path, runs):
    # --grace 300: the supervisor must not tear the ranks down itself; Slurm (--kill-on-bad-exit) does.
    job = write_job(tmp_path, "failing", procs_per_node=1, slurm=NO_PREFLIGHT)  # rank 0 on n1, rank 1 on n2
    r = cockpit(slurm_cluster, runs, "run", str(job), "-q", "--grace", "300",
                "--", "--fail-rank", "1", "--fail-step", "5")
    assert r.returncode != 0
    run_dir, status = only_run(runs)
    first = status.first_failure
    assert status.state == "failed" and (first.rank, first.host, first.status) == (1, "n2", 1)
    assert "first failure: rank 1 on n2: exit code 1" in r.stdout
    assert "RuntimeError: injected failure on rank 1 after step 5" in r.stdout
    assert "task 1: Exited with exit code 1" in read(run_dir / "logs/agent.sbatch.log")
    assert status.nodes[0].slurm.slurm_state == "FAILED"
    assert status.ended - first.time < 60
    assert status.nodes[0].slurm.job_id not in slurm_cluster.queue()
    assert procs.run_pids(status.run_id) == []


def test_stop_cancels_the_job(slurm_cluster, tmp_path, runs):
    # 2 nodes x 1 task: a stop reaches each node's tasks the same way; 2 tasks per node are the demo run's
    job = write_job(tmp_path, "long", args=["--epochs", "1", "--steps-per-epoch", "5000", *SMALL[4:]],
                    procs_per_node=1, slurm=NO_PREFLIGHT)
    proc = start_cockpit(slurm_cluster, runs, "run", str(job), "-q")
    run_dir = wait_for(lambda: list_runs(runs) and list_runs(runs)[0][0], 30, "the run directory")
    job_id = job_id_of(run_dir)
    wait_for(lambda: "[cockpit] step=10 " in rank0_log(run_dir), 120, "training to start")
    r = cockpit(slurm_cluster, runs, "stop", run_dir.name, "--grace", "30")
    assert r.returncode == 0 and f"{run_dir.name}: stopped" in r.stderr
    out, _ = proc.communicate(timeout=60)
    status = read_status(run_dir)
    assert status.state == "stopped" and f"== long ({status.run_id}): stopped in" in out
    assert status.nodes[0].slurm.slurm_state == "CANCELLED"
    wait_for(lambda: job_id not in slurm_cluster.queue(), 30, "the job to leave the queue")
    assert procs.run_pids(status.run_id) == []


def test_pending_job_shows_why_and_stops(slurm_cluster, tmp_path, runs):
    job = write_job(tmp_path, "held", slurm={"extra": ["--hold"]})
    proc = start_cockpit(slurm_cluster, runs, "run", str(job), "-q")
    run_dir = wait_for(lambda: list_runs(runs) and list_runs(runs)[0][0], 30, "the run directory")
    job_id = job_id_of(run_dir)
    status = wait_for(lambda: (s := read_status(run_dir)).nodes[0].slurm.reason and s, 30, "Slurm's reason")
    assert status.state == "starting" and status.nodes[0].slurm.slurm_state == "PENDING"
    assert status.note == f"Slurm job {job_id} PENDING (waiting in the queue; reason JobHeldUser)"
    r = cockpit(slurm_cluster, runs, "stop", run_dir.name)
    assert r.returncode == 0 and f"{run_dir.name}: stopped" in r.stderr
    out, _ = proc.communicate(timeout=60)
    assert read_status(run_dir).state == "stopped" and job_id not in slurm_cluster.queue()


def test_requeue_checkpoints_and_resumes_where_it_stopped(slurm_cluster, tmp_path, runs, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    job = write_job(tmp_path, "requeue", script=HERE / "requeue_train.py", args=["--steps", "600"], nodes=1,
                    slurm={"time": "10", "requeue": True, "signal_seconds": 100, **NO_PREFLIGHT})
    submitted = time.monotonic()
    proc = start_cockpit(slurm_cluster, runs, "run", str(job), "-q")
    run_dir = wait_for(lambda: list_runs(runs) and list_runs(runs)[0][0], 30, "the run directory")
    job_id = job_id_of(run_dir)
    assert "#SBATCH --signal=B:USR1@100" in read(run_dir / "commands/sbatch.sh")
    wait_for(lambda: "[cockpit] step=10 " in rank0_log(run_dir), 120, "training to start")
    # A short time limit, set once training runs so that USR1 cannot land before the ranks handle it: at
    # least 60 s from now, so the job's end is within 100 + 30 s and slurmctld's next time-limit check
    # (every 30 s) sends USR1, 100 s "before" it.
    minutes = math.ceil((time.monotonic() - submitted + 60) / 60)
    slurm_cluster.run("scontrol", "update", f"JobId={job_id}", f"TimeLimit={minutes}")

    def requeued():
        view = slurm_query.squeue([job_id]).get(job_id)
        return view is not None and view.restarts == 1 and view.slurm_state == "PENDING"

    wait_for(requeued, 90, "the job to checkpoint and requeue itself")
    wait_for(lambda: (s := read_status(run_dir)).state == "starting" and "reason BeginTime" in s.note, 30,
             "cockpit to show the job waiting in the queue, and why")
    # Slurm holds a requeued job back ~120 s; start it now, with the long limit back for the second attempt.
    slurm_cluster.hurry(job_id, "TimeLimit=10")
    out, err = proc.communicate(timeout=150)
    assert proc.returncode == 0, out + err
    status = read_status(run_dir)
    [node] = status.nodes
    assert status.state == "succeeded" and node.slurm.restarts == 1
    [step] = node.slurm.resumed_steps
    assert 10 <= step < 600
    assert f"requeued 1 time: restart 1 resumed at step {step}" in out
    log = rank0_log(run_dir)
    assert "[cockpit] stop requested (SIGUSR1)" in log and f"requeued Slurm job {job_id}" in log
    assert f"[cockpit] resumed from {run_dir}/checkpoints/latest.pt step={step} " in log
    assert "[cockpit] finish rank=0 step=600 exit_code=0" in log
    batch = read(run_dir / "logs/agent.sbatch.log")
    assert "cockpit: USR1 (time limit near)" in batch and "cockpit: start restart=1 " in batch
    assert len(list((run_dir / "logs/attempt-0").glob("rank-*.exit"))) == 2


def test_sweep_runs_as_one_array_with_a_directory_per_trial(slurm_cluster, tmp_path, runs):
    lrs = ["0.1", "0.03", "0.01"]
    job = write_job(tmp_path, "sweep3", nodes=1, procs_per_node=1, sweep={"grid": {"lr": lrs}},
                    slurm={"array_parallel": 3})
    r = cockpit(slurm_cluster, runs, "run", str(job), "-q")
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir, status = only_run(runs)
    assert "#SBATCH --array=0-2%3" in read(run_dir / "commands/sbatch.sh")
    assert status.state == "succeeded" and "sweep of 3 trials" in status.note and "succeeded 3" in status.note
    array = status.nodes[0].slurm.array_job_id
    assert [(n.trial.index, n.slurm.job_id, n.state) for n in status.nodes] == [
        (i, f"{array}_{i}", "succeeded") for i in range(3)]
    for i, lr in enumerate(lrs):
        trial = run_dir / f"trial-{i}"
        trial_status = read_status(trial)
        assert trial_status.state == "succeeded" and set(trial_status.ranks) == {"0"}
        assert (trial / "checkpoints/latest.pt").exists()
        assert json.loads(read(trial / "metrics/rank-0.jsonl").splitlines()[-1])["step"] == 10
        assert f"cockpit: trial {i}: --lr {lr}" in read(run_dir / f"logs/agent.trial-{i}.log")
        logs = cockpit(slurm_cluster, runs, "logs", str(trial), "--rank", "0")
        assert logs.returncode == 0 and "[cockpit] finish rank=0 step=10 exit_code=0" in logs.stdout
    ps = cockpit(slurm_cluster, runs, "ps")
    header, sweep, *trials = ps.stdout.splitlines()  # the sweep is one run; its trials are indented under it
    assert header.startswith("RUN") and sweep.startswith(status.run_id[:20]) and "succeeded" in sweep
    assert [t.split()[:3] for t in trials] == [["trial", str(i), "succeeded"] for i in range(3)]
    assert [t.split()[-2:] for t in trials] == [["--lr", lr] for lr in lrs]
    [row] = json.loads(cockpit(slurm_cluster, runs, "ps", "--json").stdout)["runs"]
    assert [n["state"] for n in row["nodes"]] == ["succeeded"] * 3


def test_requeue_on_demand_checkpoints_through_the_same_usr1_path(slurm_cluster, tmp_path, runs, monkeypatch):
    """The TUI's requeue (cockpit.launch.slurm.launcher.requeue) on a job that can checkpoint: USR1 to its batch shell,
    the ranks checkpoint and the job requeues itself, as before a time limit; only no limit is near."""
    from cockpit.launch.slurm import job as slurm

    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    job = write_job(tmp_path, "requeue-now", script=HERE / "requeue_train.py", args=["--steps", "600"], nodes=1,
                    slurm={"time": "10", "requeue": True, "signal_seconds": 100, **NO_PREFLIGHT})
    proc = start_cockpit(slurm_cluster, runs, "run", str(job), "-q")
    run_dir = wait_for(lambda: list_runs(runs) and list_runs(runs)[0][0], 30, "the run directory")
    job_id = job_id_of(run_dir)
    wait_for(lambda: "[cockpit] step=10 " in rank0_log(run_dir), 120, "training to start")
    assert slurm.requeue(run_dir) == f"scancel --batch --signal=USR1 {job_id}"

    def requeued():
        view = slurm_query.squeue([job_id]).get(job_id)
        return view is not None and view.restarts == 1 and view.slurm_state == "PENDING"

    wait_for(requeued, 60, "the job to checkpoint and requeue itself")
    log = rank0_log(run_dir)
    assert "[cockpit] stop requested (SIGUSR1)" in log and f"requeued Slurm job {job_id}" in log
    assert (run_dir / "checkpoints/latest.pt").exists()
    slurm_cluster.run("scancel", job_id)
    proc.communicate(timeout=90)
    with pytest.raises(SlurmError, match="nothing to requeue"):
        slurm.requeue(run_dir)


def test_a_bad_partition_is_refused_before_sbatch_and_sbatch_refusal_reaches_the_user(slurm_cluster, tmp_path, runs):
    job = str(write_job(tmp_path, "nowhere", slurm={"partition": "nope"}))
    r = cockpit(slurm_cluster, runs, "run", job)  # the preflight asks sinfo: nothing is submitted or written
    assert r.returncode == 2 and "preflight failed" in r.stderr and "nope is not a partition" in r.stderr
    assert list_runs(runs) == []
    r = cockpit(slurm_cluster, runs, "run", job, "--no-preflight")  # past it, sbatch's own refusal is shown
    assert r.returncode == 2 and "sbatch refused the job" in r.stderr and "invalid partition" in r.stderr.lower()
    _, status = only_run(runs)
    assert status.state == "unsubmitted" and "sbatch refused the job" in status.note


@pytest.mark.parametrize("job", [j for j in JOBS if load_spec(j).launcher == "slurm"], ids=lambda j: j.stem)
def test_example_jobs_pass_sbatch_test_only(slurm_cluster, tmp_path, job):
    # The test cluster has what the examples ask for (partition gpu, gpu:a100 GRES, 64 CPUs and 128 GB per
    # node; no accounting, so any account is accepted): their scripts go in unchanged.
    spec = load_spec(job)
    script = tmp_path / "job.sh"
    script.write_text(render(spec, dry_run_facts(spec, str(job), str(tmp_path)), "sbatch"))
    r = slurm_cluster.run("sbatch", "--test-only", str(script), check=False)
    assert r.returncode == 0 and "to start at" in r.stderr, r.stderr


# runner: spawn: a script that calls torch.multiprocessing.spawn itself (jobs/own/spawn_ddp.py) runs as one srun
# task per node; each spawned process is a rank with its own log and exit record, by global rank.
def test_a_spawning_script_on_two_nodes_gives_one_log_per_spawned_rank(slurm_cluster, tmp_path, runs):
    job = write_job(tmp_path, "spawn2x2", script=REPO / "jobs/own/spawn_ddp.py", args=["2", "2"], slurm=NO_PREFLIGHT)
    job.write_text(job.read_text() + "runner: spawn\n")
    r = cockpit(slurm_cluster, runs, "run", str(job))
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir, status = only_run(runs)
    assert (status.state, status.hosts, status.world_size) == ("succeeded", ["n1", "n2"], 4)
    assert "--ntasks-per-node=1" in (run_dir / "commands/sbatch.sh").read_text()
    logs = sorted(p.name for p in (run_dir / "logs").glob("rank-*.log"))
    assert logs == ["rank-0.n1.log", "rank-1.n1.log", "rank-2.n2.log", "rank-3.n2.log"]
    for rank, host in enumerate(["n1", "n1", "n2", "n2"]):
        assert f"[{host}:{rank}] spawned rank {rank} epoch 1" in r.stdout
        assert (run_dir / "logs" / f"rank-{rank}.{host}.exit").read_text().split()[0] == "0"
    for host in ("n1", "n2"):
        assert "spawning 2 processes" in (run_dir / "logs" / f"agent.{host}.log").read_text()
    assert sorted(status.ranks) == ["0", "1", "2", "3"]
