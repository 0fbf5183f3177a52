"""Manual GPU check of the training runtime (not collected by pytest; run it where a GPU is at hand).

    python tests/gpu/check_gpu_train.py                     # every visible GPU: {ddp,fsdp,dp} x {fp32,fp16,bf16}
    python tests/gpu/check_gpu_train.py --nproc 1 --backends fsdp --precisions bf16
    python tests/gpu/check_gpu_train.py --cpu               # smoke-test this script itself: gloo, CPU

For each backend and precision it runs jobs/demo.py with cockpit.train: ddp and fsdp under torchrun
(COCKPIT_PG_BACKEND=nccl, one rank per GPU), dp as one process over every visible GPU (DataParallel, autocast
inside each replica). It prints the global samples/s (median over the steady-state steps of rank 0's metrics,
times the world size), the peak CUDA memory rank 0 reports at exit (torch.cuda.max_memory_allocated, in its
"[cockpit] finish ..." line; fsdp's is the sharded one) and the first and last loss. Exits 1, with every
failure's output on stderr and a FAILED line per run, if any run fails or its loss does not fall.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "jobs" / "demo.py"
PEAK = re.compile(r"\[cockpit\] finish rank=0 .*peak_mem_mib=([0-9.]+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gpu_count() -> int:
    import torch  # here only: --help should not need torch

    return torch.cuda.device_count()


def run_one(backend: str, precision: str, nproc: int, pg: str, demo_args: list[str], run_dir: Path) -> dict:
    """Run the demo once; return samples/s, peak memory and losses (raises with the output on failure)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COCKPIT_", "SLURM_"))}
    env.update(PYTHONUNBUFFERED="1", COCKPIT_RUN_DIR=str(run_dir), COCKPIT_PG_BACKEND=pg,
               COCKPIT_PRECISION=precision, COCKPIT_BACKEND=backend)
    if backend == "dp":  # one process drives every visible GPU
        cmd = [sys.executable, str(DEMO), *demo_args]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
               "--master-addr=127.0.0.1", f"--master-port={free_port()}", str(DEMO), *demo_args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=False)
    out = done.stdout + done.stderr
    if done.returncode != 0:
        raise RuntimeError(f"{backend} {precision}: `{' '.join(cmd)}` exited {done.returncode}\n{out[-4000:]}")
    lines = [json.loads(x) for x in (run_dir / "metrics" / "rank-0.jsonl").read_text().splitlines()]
    steady = lines[len(lines) // 5:] or lines  # skip warm-up (cuDNN/cuBLAS autotuning, allocator growth)
    peak = PEAK.search(out)
    return {
        "backend": backend, "precision": precision,
        "samples_per_s": statistics.median(m["samples_per_s"] for m in steady) * (1 if backend == "dp" else nproc),
        "peak_mem_mib": float(peak.group(1)) if peak else None,
        "first_loss": lines[0]["loss"], "last_loss": lines[-1]["loss"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=int, default=None, help="ranks (default: every visible GPU)")
    p.add_argument("--backends", default="ddp,fsdp,dp")
    p.add_argument("--precisions", default="fp16,bf16,fp32")
    p.add_argument("--cpu", action="store_true", help="gloo on CPU: checks this script, not the GPU paths")
    p.add_argument("--demo-args", default="--epochs 1 --steps-per-epoch 300 --hidden 2048 --layers 4 "
                   "--batch-size 512 --features 256", help="passed to jobs/demo.py")
    args = p.parse_args(argv)
    runs = [(b, x) for b in args.backends.split(",") if b for x in args.precisions.split(",") if x]
    nproc = args.nproc or (2 if args.cpu else gpu_count())
    if nproc < 1:
        print("FAILED: no CUDA device visible to torch, so nothing was checked; hint: run on a GPU node "
              "(check CUDA_VISIBLE_DEVICES and torch.version.cuda), or pass --cpu to smoke-test this script",
              file=sys.stderr)
        return 1
    pg = "gloo" if args.cpu else "nccl"
    results, failed = [], []
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        for backend, precision in runs:
            try:
                r = run_one(backend, precision, nproc, pg, args.demo_args.split(), Path(tmp) / f"{backend}-{precision}")
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                print(exc, file=sys.stderr)
                failed.append(f"{backend} {precision}: the run failed (output above)")
                continue
            if not r["last_loss"] < r["first_loss"]:
                failed.append(f"{backend} {precision}: the loss did not fall ({r['first_loss']} -> {r['last_loss']})")
            results.append(r)
    print(f"{'backend':<8} {'precision':<10} {'samples/s':>12} {'peak MiB':>10} {'loss first -> last':>22}"
          f"   ({nproc} x {pg})")
    for r in results:
        peak = f"{r['peak_mem_mib']:.1f}" if r["peak_mem_mib"] is not None else "-"
        print(f"{r['backend']:<8} {r['precision']:<10} {r['samples_per_s']:12.1f} {peak:>10} "
              f"{r['first_loss']:>10.4f} -> {r['last_loss']:<9.4f}")
    for line in failed:
        print(f"FAILED: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
