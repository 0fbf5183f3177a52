"""A script written for GPUs run where torch sees none (issue 33, item 4): `no_gpu`, with a hint that names the
job's fields. Lines come from torch's own sources: torch/distributed/distributed_c10d.py ("Distributed package
doesn't have NCCL built in"), torch/cuda/__init__.py ("Torch not compiled with CUDA enabled"), the accelerator
API in libtorch ("Cannot access accelerator device when none is available."), c10/cuda/CUDAFunctions.cpp ("No
CUDA GPUs are available", "Found no NVIDIA driver on your system"), torch/csrc/distributed/c10d/
ProcessGroupNCCL.cpp ("ProcessGroupNCCL is only supported with GPUs, no GPUs found!"); and the real stderr of
torch 2.13.0+cpu, run here, for the calls a GPU script makes first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env

from cockpit.logs.diagnose.report import diagnose_paths, report_to_dict
from cockpit.logs.parse.rules import classify
from cockpit.run.store import list_runs

LINES = [
    "RuntimeError: Distributed package doesn't have NCCL built in",
    "[rank1]: RuntimeError: Distributed package doesn't have NCCL built in",
    "AssertionError: Torch not compiled with CUDA enabled",
    "RuntimeError: Cannot access accelerator device when none is available.",
    "RuntimeError: No CUDA GPUs are available",
    "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
    "driver from http://www.nvidia.com/Download/index.aspx",
    "ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
    "AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'",
]
NOT_NO_GPU = [
    "UserWarning: Attempted to get default timeout for nccl backend, but NCCL support is not compiled",
    "using device cuda:0, 8 GPUs are available",
    "AttributeError: module 'torch' has no attribute 'compile_cuda'",
]


@pytest.mark.parametrize("line", LINES)
def test_torch_words_for_no_gpu_are_no_gpu(line):
    assert [kind for kind, _ in classify(line)] == ["no_gpu"]


@pytest.mark.parametrize("line", NOT_NO_GPU)
def test_lines_that_only_mention_cuda_are_not_no_gpu(line):
    assert "no_gpu" not in [kind for kind, _ in classify(line)]


def skip_where_torch_sees_a_gpu() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this torch sees a GPU: the calls a GPU script makes succeed here")


SCRIPTS = {
    "nccl": "import torch.distributed as dist\n"
            "dist.init_process_group('nccl', init_method='file://' + __import__('sys').argv[1], rank=0, "
            "world_size=1)\n",
    "to_cuda": "import torch\ntorch.zeros(2).to('cuda')\n",
    "accelerator": "import torch\ntorch.accelerator.set_device_index(0)\n",
    "set_device": "import torch\ntorch.cuda.set_device(0)\n",
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_gpu_call_on_this_cpu_torch_is_diagnosed_with_the_job_fields(name, tmp_path):
    skip_where_torch_sees_a_gpu()
    script = tmp_path / f"{name}.py"
    script.write_text(SCRIPTS[name])
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "store")], capture_output=True, text=True,
                       env=cockpit_env(), timeout=120)
    assert r.returncode != 0
    log = tmp_path / f"{name}.log"
    log.write_text(r.stdout + r.stderr)
    report = report_to_dict(diagnose_paths([log]))
    [finding] = [f for f in report["findings"] if f["code"] == "no_gpu"]
    assert finding["severity"] == "error"
    assert "pg_backend: gloo" in finding["hint"] and "gpus:" in finding["hint"]
    assert "COCKPIT_PG_BACKEND" in finding["hint"]


JOB = """name: gpu-on-cpu
script: {script}
launcher: local
gpus: none
"""


@pytest.mark.slow
def test_a_gpu_script_on_a_cpu_run_gets_no_gpu_in_the_summary_and_diagnose(tmp_path):
    skip_where_torch_sees_a_gpu()
    script = tmp_path / "gpu_ddp.py"
    script.write_text("import torch.distributed as dist\ndist.init_process_group('nccl')\nprint('never')\n")
    job = tmp_path / "job.yaml"
    job.write_text(JOB.format(script=script))
    runs = tmp_path / "runs"
    env = cockpit_env(COCKPIT_RUNS_DIR=str(runs), NO_COLOR="1")
    r = subprocess.run([sys.executable, "-m", "cockpit", "run", str(job)], capture_output=True, text=True,
                       cwd=REPO, env=env, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    summary = r.stdout[r.stdout.index("== gpu-on-cpu"):]
    assert "RuntimeError: Distributed package doesn't have NCCL built in" in summary
    assert "The script asks for a GPU (CUDA or NCCL) and torch sees none" in summary
    assert "pg_backend: gloo" in summary
    [(run_dir, _status)] = list_runs(runs)
    d = subprocess.run([sys.executable, "-m", "cockpit", "diagnose", str(run_dir), "--json"], capture_output=True,
                       text=True, cwd=REPO, env=env, timeout=120)
    assert d.returncode == 1, d.stdout + d.stderr
    report = json.loads(d.stdout)
    codes = [f["code"] for f in report["findings"]]
    assert "no_gpu" in codes
    assert any("no_gpu" in f["kinds"] for f in report["files"] if Path(f["path"]).name.startswith("rank-0."))
