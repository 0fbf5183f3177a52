"""Manual GPU check of the training runtime (not collected by pytest; run it where a GPU is at hand).

    python tests/gpu/check_gpu_train.py                     # every visible GPU, nccl, fp16 + bf16 + fp32
    python tests/gpu/check_gpu_train.py --nproc 1 --precisions bf16
    python tests/gpu/check_gpu_train.py --cpu               # smoke-test this script itself: gloo, CPU

For each precision it runs jobs/demo.py under torchrun (COCKPIT_PG_BACKEND=nccl) and prints the global
samples/s (median over the steady-state steps of rank 0's metrics, times the world size), the peak CUDA
memory rank 0 reports at exit (torch.cuda.max_memory_allocated, in its "[cockpit] finish ..." line) and
the first and last loss. Exits 1 if any run fails or its loss does not fall.
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


def run_one(precision: str, nproc: int, pg: str, demo_args: list[str], run_dir: Path) -> dict:
    """Run the demo once; return samples/s, peak memory and losses (raises with the output on failure)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COCKPIT_", "SLURM_"))}
    env.update(PYTHONUNBUFFERED="1", COCKPIT_RUN_DIR=str(run_dir), COCKPIT_PG_BACKEND=pg,
               COCKPIT_PRECISION=precision, COCKPIT_BACKEND="ddp")
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
           "--master-addr=127.0.0.1", f"--master-port={free_port()}", str(DEMO), *demo_args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=False)
    out = done.stdout + done.stderr
    if done.returncode != 0:
        raise RuntimeError(f"{precision}: `{' '.join(cmd)}` exited {done.returncode}\n{out[-4000:]}")
    lines = [json.loads(x) for x in (run_dir / "metrics" / "rank-0.jsonl").read_text().splitlines()]
    steady = lines[len(lines) // 5:] or lines  # skip warm-up (cuDNN/cuBLAS autotuning, allocator growth)
    peak = PEAK.search(out)
    return {
        "precision": precision,
        "samples_per_s": statistics.median(m["samples_per_s"] for m in steady) * nproc,
        "peak_mem_mib": float(peak.group(1)) if peak else None,
        "first_loss": lines[0]["loss"], "last_loss": lines[-1]["loss"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=int, default=None, help="ranks (default: every visible GPU)")
    p.add_argument("--precisions", default="fp16,bf16,fp32")
    p.add_argument("--cpu", action="store_true", help="gloo on CPU (fp16 skipped): checks this script")
    p.add_argument("--demo-args", default="--epochs 1 --steps-per-epoch 300 --hidden 2048 --layers 4 "
                   "--batch-size 512 --features 256", help="passed to jobs/demo.py")
    args = p.parse_args(argv)
    precisions = [x for x in args.precisions.split(",") if x and not (args.cpu and x == "fp16")]
    nproc = args.nproc or (2 if args.cpu else gpu_count())
    if nproc < 1:
        print("no CUDA device visible; hint: run on a GPU node, or pass --cpu to smoke-test", file=sys.stderr)
        return 1
    pg = "gloo" if args.cpu else "nccl"
    results, failed = [], False
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        for precision in precisions:
            try:
                r = run_one(precision, nproc, pg, args.demo_args.split(), Path(tmp) / precision)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                print(exc, file=sys.stderr)
                failed = True
                continue
            failed |= not r["last_loss"] < r["first_loss"]
            results.append(r)
    print(f"{'precision':<10} {'samples/s':>12} {'peak MiB':>10} {'loss first -> last':>22}   ({nproc} x {pg})")
    for r in results:
        peak = f"{r['peak_mem_mib']:.1f}" if r["peak_mem_mib"] is not None else "-"
        print(f"{r['precision']:<10} {r['samples_per_s']:12.1f} {peak:>10} "
              f"{r['first_loss']:>10.4f} -> {r['last_loss']:<9.4f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
