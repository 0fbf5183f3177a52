"""A user's own Lightning script (jobs/own/lightning_ddp.py, no cockpit import) under cockpit's sbatch form on
the test Slurm cluster: 2 nodes x 2 tasks on CPU with gloo.

Under srun Lightning picks SLURMEnvironment (SLURM_NTASKS set, job name not "bash"/"interactive"): ranks from
SLURM_PROCID / SLURM_LOCALID / SLURM_NODEID, world size from SLURM_NTASKS, MASTER_ADDR / MASTER_PORT from the
batch script's exports. It refuses devices != SLURM_NTASKS_PER_NODE (the job's procs_per_node) and num_nodes
!= SLURM_NNODES, and with auto-requeue (its default) its SIGUSR1 handler saves hpc_ckpt_N.ckpt in
default_root_dir and has rank 0 run `scontrol requeue`; a requeued attempt resumes from the newest one. cockpit
must deliver that USR1 exactly once to every rank and leave the requeue to Lightning (cockpit itself never
requeues: only its own runtime, cockpit.train, does, and a Lightning script does not use it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers import REPO, wait_for

from cockpit.launch import procs
from cockpit.run.store import list_runs, read_status

pytestmark = pytest.mark.slow
SCRIPT = REPO / "jobs" / "own" / "lightning_ddp.py"
HERE = Path(__file__).parent
HOSTS = ["n1", "n1", "n2", "n2"]  # rank -> node


def write_job(tmp_path: Path, name: str, args: list[str], slurm: dict | None = None, nodes: int = 2) -> Path:
    # No in-allocation preflight (test_alloc_preflight.py checks it): its torch import per node costs seconds
    # on a loaded machine, and these tests are about the script's own ranks.
    job = {"name": name, "script": str(SCRIPT), "args": args, "launcher": "slurm", "nodes": nodes,
           "procs_per_node": 2, "gpus": "none", "python": sys.executable,
           "slurm": {"preflight": False, **(slurm or {})}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def env_for(cluster, runs: Path) -> dict[str, str]:
    return {**cluster.env, "COCKPIT_RUNS_DIR": str(runs), "NO_COLOR": "1"}


def cockpit(cluster, runs: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=REPO,
                          env=env_for(cluster, runs), timeout=240)


def rank_log(run_dir: Path, rank: int) -> str:
    path = run_dir / f"logs/rank-{rank}.{HOSTS[rank]}.log"
    return path.read_text(errors="replace") if path.exists() else ""


@pytest.fixture
def runs(tmp_path):
    """This test's runs directory; afterwards no supervisor of it is left (it cancels its job on SIGTERM)."""
    path = tmp_path / "runs"
    yield path
    for _, status in list_runs(path) if path.is_dir() else []:
        sup = status.supervisor
        if sup and procs.is_alive(sup["pid"], sup.get("start")):
            os.kill(sup["pid"], signal.SIGTERM)
            deadline = time.monotonic() + 30
            while procs.is_alive(sup["pid"], sup.get("start")) and time.monotonic() < deadline:
                time.sleep(0.2)


def test_lightning_runs_on_two_nodes_by_two_tasks_in_slurm_environment(slurm_cluster, tmp_path, runs):
    job = write_job(tmp_path, "own-lightning", ["--devices", "2", "--num-nodes", "2", "--epochs", "2"])
    r = cockpit(slurm_cluster, runs, "run", str(job))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    [(run_dir, status)] = list_runs(runs)
    assert (status.state, status.hosts, status.world_size) == ("succeeded", ["n1", "n2"], 4)
    assert {k: (v.host, v.status) for k, v in status.ranks.items()} == {str(k): (h, 0) for k, h in enumerate(HOSTS)}
    for rank, host in enumerate(HOSTS):
        log = rank_log(run_dir, rank)
        # Lightning's own view: SLURMEnvironment, this rank of 4 (128 samples per rank, 32 a batch: 8 steps)
        assert f"lightning: rank {rank} of 4, SLURMEnvironment" in log, log[-2000:]
        assert f"lightning: rank {rank} done after 8 steps" in log
        assert f"[{host}:{rank}] lightning: rank {rank} epoch 1 step 8 loss " in r.stdout
    assert "srun` command is available on your system but is not used" not in r.stdout


def test_lightning_devices_other_than_procs_per_node_fail_with_lightnings_hint(slurm_cluster, tmp_path, runs):
    # one node of 2 tasks: the check is Lightning's devices against SLURM_NTASKS_PER_NODE, whatever the node count
    # (2 nodes x 2 tasks is the run above); each rank imports Lightning, seconds apiece on a loaded machine
    job = write_job(tmp_path, "own-lightning-bad", ["--devices", "1", "--num-nodes", "1"], nodes=1)
    r = cockpit(slurm_cluster, runs, "run", str(job), "-q")
    # every rank raises at once; srun's --kill-on-bad-exit ends the later ones (143), which is the job's code
    assert r.returncode in (1, 143), r.stdout[-3000:] + r.stderr[-3000:]
    [(_, status)] = list_runs(runs)
    assert status.state == "failed" and status.first_failure.status == 1
    assert "does not match. HINT: Set `devices=2`." in r.stdout  # the first failure's traceback


def test_usr1_before_the_time_limit_reaches_every_rank_once(slurm_cluster, tmp_path, runs):
    """USR1 as Slurm sends it before the time limit with --signal=B:USR1@N (to the batch shell): the batch
    shell passes it to srun, slurmstepd to every process of the step, the rank wrapper passes nothing on.
    Lightning's auto-requeue handler checkpoints and has rank 0 `scontrol requeue` on each USR1 it gets: it
    must get one. (Lightning's own handler is not run here: it checkpoints inside the signal handler, with a
    barrier, and hangs when a rank is inside DDP's all-reduce at that moment, Lightning-AI/pytorch-lightning
    #21406; 2 of 4 tries here with 2.6.6.)"""
    job = tmp_path / "usr1.yaml"
    job.write_text(yaml.safe_dump({"name": "own-usr1", "script": str(HERE / "usr1_count.py"), "launcher": "slurm",
                                   "nodes": 2, "procs_per_node": 2, "gpus": "none", "python": sys.executable,
                                   "slurm": {"time": "10", "requeue": True, "signal_seconds": 100,
                                             "preflight": False}}))
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(job), "-q"], cwd=REPO,
                            env=env_for(slurm_cluster, runs), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run_dir = wait_for(lambda: list_runs(runs) and list_runs(runs)[0][0], 30, "the run directory")
        job_id = wait_for(lambda: (s := read_status(run_dir)).nodes and s.nodes[0].slurm.job_id, 30, "a job id")
        wait_for(lambda: all(f"usr1 ready rank {k}" in rank_log(run_dir, k) for k in range(4)), 120,
                 "every rank to have its handler")
        slurm_cluster.run("scancel", "--batch", "--signal=USR1", job_id)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # a failed wait: the follower goes; the runs fixture stops the supervisor
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    assert [rank_log(run_dir, k).splitlines()[-1] for k in range(4)] == ["usr1 count 1"] * 4
    assert "cockpit: USR1 (time limit near)" in _batch_log(run_dir)
    assert read_status(run_dir).state == "succeeded"


def _batch_log(run_dir: Path) -> str:
    path = run_dir / "logs/agent.sbatch.log"
    return path.read_text(errors="replace") if path.exists() else ""
