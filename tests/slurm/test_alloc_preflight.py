"""The preflight inside the allocation on the test Slurm cluster (tests/slurm/cluster.py): real sbatch, a real
srun step on every node, a real gloo all-reduce across the nodes, the judge in the batch shell, the
supervisor's note and the resubmission with --exclude.

How one node is made bad: both slurmd run on this machine, so their interfaces, drivers and torch are the
same, and there are no GPUs (gres is backed by /dev/null). The check asks ``nvidia-smi`` for the GPUs, found
on PATH like any program; the test puts a stand-in nvidia-smi first on the PATH that ``cockpit run`` (and so
sbatch, and so every task) inherits. It answers in nvidia-smi's own format (values from the real H100
capture in tests/fixtures/nvidia-smi/) with as many GPUs as the file ``<node>.gpus`` beside it says, per
node by SLURMD_NODENAME, which Slurm sets in every task. So the seam is an ordinary program on PATH, the
way a broken node really differs (its nvidia-smi lists one GPU less); cockpit's code has no test switch.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import REPO

from cockpit.node.nodejudge import PREFLIGHT_EXIT
from cockpit.run.store import read_status

pytestmark = pytest.mark.slow
# The row nvidia-smi prints for --query-gpu=index,pci.bus_id,uuid,name,driver_version --format=csv,noheader,
# from the H100 capture's values (tests/fixtures/nvidia-smi/h100-load-query-gpu.csv).
FAKE_SMI = """#!/bin/sh
n=$(cat "$(dirname "$0")/${SLURMD_NODENAME:-none}.gpus" 2>/dev/null || echo 0)
i=0
while [ "$i" -lt "$n" ]; do
  echo "$i, 00000000:0$i:09.0, GPU-00000000-0000-0000-0000-00000000000$i, NVIDIA H100 80GB HBM3, 590.48.01"
  i=$((i + 1))
done
"""
TRAIN = "import os\nprint('trained on', os.environ['COCKPIT_HOST'], 'rank', os.environ['RANK'], flush=True)\n"


def fake_smi(tmp_path: Path, gpus: dict[str, int]) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    for node, count in gpus.items():
        (bin_dir / f"{node}.gpus").write_text(f"{count}\n")
    return bin_dir


def write_job(tmp_path: Path, name: str, nodes: int, gpus: int, slurm: dict | None = None) -> Path:
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    job = {"name": name, "script": str(script), "launcher": "slurm", "nodes": nodes, "procs_per_node": 1,
           "gpus": gpus or "none", "pg_backend": "gloo", "python": sys.executable,
           "slurm": {"gres_type": "a100", **(slurm or {})}}
    if not gpus:
        del job["slurm"]["gres_type"]
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def run(cluster, tmp_path: Path, job: Path, bin_dir: Path | None = None) -> tuple[subprocess.CompletedProcess, Path]:
    runs = tmp_path / "runs"
    env = {**cluster.env, "COCKPIT_RUNS_DIR": str(runs), "NO_COLOR": "1"}
    if bin_dir is not None:
        env["PATH"] = f"{bin_dir}:{env['PATH']}"
    r = subprocess.run([sys.executable, "-m", "cockpit", "run", str(job), "-q"], capture_output=True, text=True,
                       cwd=REPO, env=env, timeout=240)
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    return r, run_dir


def batch_log(run_dir: Path) -> str:
    return (run_dir / "logs" / "agent.sbatch.log").read_text()


def test_a_node_with_a_gpu_missing_fails_fast_and_is_named(slurm_cluster, tmp_path):
    bin_dir = fake_smi(tmp_path, {"n1": 4, "n2": 3})
    r, run_dir = run(slurm_cluster, tmp_path, write_job(tmp_path, "pf-bad", nodes=2, gpus=4), bin_dir)
    assert r.returncode == PREFLIGHT_EXIT, r.stdout + r.stderr
    log = batch_log(run_dir)
    assert ("cockpit: preflight: node n2: 3 GPUs visible (nvidia-smi ids 0,1,2), the job asks 4 per node"
            in log), log
    assert "cockpit: preflight: failed on n2" in log and "node n1" not in log
    assert not list((run_dir / "logs").glob("rank-*")), "training must not have started"
    status = read_status(run_dir)
    assert status.state == "failed" and status.exit_code == PREFLIGHT_EXIT
    assert status.note.startswith("preflight in the allocation failed after ") and "node n2: 3 GPUs" in status.note
    assert "slurm.exclude_bad_nodes: true" in status.note and "node n2: 3 GPUs" in r.stdout + r.stderr
    (job_id,) = [n.slurm.job_id for n in status.nodes]
    verdict = json.loads((run_dir / "logs" / "preflight" / job_id / "verdict.json").read_text())
    assert list(verdict["bad"]) == ["n2"] and verdict["nodes"] == ["n1", "n2"]
    n1 = json.loads((run_dir / "logs" / "preflight" / job_id / "n1.json").read_text())
    assert len(n1["gpus"]) == 4 and n1["driver"] == "590.48.01" and n1["allreduce"]["ok"] is True
    assert n1["slurm_gpus"] is not None and len(n1["slurm_gpus"].split(",")) == 4  # Slurm gave the step 4 GPUs


def test_exclude_bad_nodes_resubmits_once_without_the_node(slurm_cluster, tmp_path):
    # One node is asked for and Slurm gives n1 first; n1 is the bad one, so the second job must go to n2.
    bin_dir = fake_smi(tmp_path, {"n1": 2, "n2": 4})
    job = write_job(tmp_path, "pf-exclude", nodes=1, gpus=4, slurm={"exclude_bad_nodes": True})
    r, run_dir = run(slurm_cluster, tmp_path, job, bin_dir)
    assert r.returncode == 0, r.stdout + r.stderr + batch_log(run_dir)
    status = read_status(run_dir)
    (node,) = status.nodes
    assert status.state == "succeeded" and node.slurm.excluded == ("n1",) and len(node.slurm.earlier_jobs) == 1
    first, second = node.slurm.earlier_jobs[0], node.slurm.job_id
    assert first != second
    log = batch_log(run_dir)
    assert f"job={first} nodes=n1" in log and f"job={second} nodes=n2" in log
    assert "cockpit: preflight: node n1: 2 GPUs visible" in log and "cockpit: preflight: ok: 1 nodes" in log
    assert "trained on n2 rank 0" in (run_dir / "logs" / "rank-0.n2.log").read_text()
    assert json.loads((run_dir / "logs" / "preflight" / first / "verdict.json").read_text())["bad"]
    assert json.loads((run_dir / "logs" / "preflight" / second / "verdict.json").read_text())["ok"] is True


def test_a_good_allocation_passes_with_an_all_reduce_across_the_nodes(slurm_cluster, tmp_path):
    r, run_dir = run(slurm_cluster, tmp_path, write_job(tmp_path, "pf-ok", nodes=2, gpus=0))
    assert r.returncode == 0, r.stdout + r.stderr + batch_log(run_dir)
    (job_id,) = [n.slurm.job_id for n in read_status(run_dir).nodes]
    answers = [json.loads((run_dir / "logs" / "preflight" / job_id / f"{n}.json").read_text()) for n in ("n1", "n2")]
    assert [a["allreduce"]["ok"] for a in answers] == [True, True], answers
    assert all(a["torch"] and a["interfaces"] for a in answers)
    assert "cockpit: preflight: ok: 2 nodes in" in batch_log(run_dir)


def test_preflight_false_leaves_the_check_out(slurm_cluster, tmp_path):
    """slurm.preflight: false: no check step, no preflight files (the cost measured in the README comes from
    alternating this with a checked job)."""
    r, run_dir = run(slurm_cluster, tmp_path, write_job(tmp_path, "pf-off", nodes=2, gpus=0,
                                                         slurm={"preflight": False}))
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (run_dir / "logs" / "preflight").exists()
    assert "cockpit: preflight" not in batch_log(run_dir)
