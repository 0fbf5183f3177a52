"""Manual GPU check: the user's own Lightning script (jobs/own/lightning_ddp.py) under `cockpit run`, on every
visible GPU with nccl (not collected by pytest; run it where a GPU is at hand).

    python tests/gpu/check_gpu_lightning.py          # one rank per visible GPU
    python tests/gpu/check_gpu_lightning.py --cpu    # smoke-test this script itself: 2 CPU ranks, gloo

It writes a job (launcher local, gpus: all, procs_per_node = the GPU count, pg_backend nccl), runs it, and
checks that cockpit exits 0, that every rank's own log says Lightning saw it as rank R of N under
TorchElasticEnvironment on the GPU, and that it finished. Exits 1 with the run's output if not.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "jobs" / "own" / "lightning_ddp.py"


def gpu_count() -> int:
    import torch  # here only: --help should not need torch

    return torch.cuda.device_count()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu", action="store_true", help="2 CPU ranks with gloo (checks this script, not a GPU)")
    args = p.parse_args()
    n = 2 if args.cpu else gpu_count()
    if n == 0:
        print("check_gpu_lightning: no CUDA GPU visible (torch.cuda.device_count() == 0); "
              "hint: run it on a GPU node, or with --cpu", file=sys.stderr)
        return 1
    accel = "cpu" if args.cpu else "gpu"
    with tempfile.TemporaryDirectory(prefix="cockpit-gpu-lightning-") as tmp:
        job = Path(tmp) / "lightning.yaml"
        job.write_text(f"name: gpu-lightning\nscript: {SCRIPT}\nlauncher: local\n"
                       f"gpus: {'none' if args.cpu else 'all'}\nprocs_per_node: {n}\n"
                       f"pg_backend: {'gloo' if args.cpu else 'nccl'}\nenv:\n  NCCL_DEBUG: WARN\n"
                       f"args: [--accelerator, {accel}, --devices, '{n}', --epochs, '2']\n")
        env = {**os.environ, "COCKPIT_RUNS_DIR": str(Path(tmp) / "runs"), "NO_COLOR": "1"}
        done = subprocess.run([sys.executable, "-m", "cockpit", "run", str(job)], env=env, capture_output=True,
                              text=True, timeout=900, check=False)
        out = done.stdout + done.stderr
        missing = [f"rank {r}: {what}" for r in range(n) for what in (
            f"lightning: rank {r} of {n}, TorchElasticEnvironment", f"lightning: rank {r} done after")
            if what not in out]
        if done.returncode != 0 or missing:
            print(out[-6000:], file=sys.stderr)
            print(f"FAILED: cockpit exited {done.returncode}; missing: {missing}", file=sys.stderr)
            return 1
        print(f"ok: Lightning DDP on {n} {'CPU ranks' if args.cpu else 'GPUs'} ({accel}), every rank's own log")
        return 0


if __name__ == "__main__":
    sys.exit(main())
