"""A plain torch.distributed script (no cockpit.train): every step reads a batch, then all_reduces it.
--stuck-rank R blocks forever in load_batch before step --stuck-step; --slow-rank R sleeps --slow-ms more per
step (a straggler); --quiet-start S sleeps S seconds before any output (model load)."""

import argparse
import os
import time

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=20)
p.add_argument("--stuck-rank", type=int, default=-1)
p.add_argument("--stuck-step", type=int, default=3)
p.add_argument("--slow-rank", type=int, default=-1)
p.add_argument("--slow-ms", type=float, default=0.0)
p.add_argument("--step-ms", type=float, default=5.0)
p.add_argument("--quiet-start", type=float, default=0.0)
args = p.parse_args()

time.sleep(args.quiet_start)
dist.init_process_group("gloo")
rank = dist.get_rank()


def load_batch(step: int) -> torch.Tensor:
    if rank == args.stuck_rank and step == args.stuck_step:
        while True:
            time.sleep(1)  # a stuck data reader
    time.sleep(args.step_ms / 1000 + (args.slow_ms / 1000 if rank == args.slow_rank else 0.0))
    return torch.ones(1024)


for step in range(args.steps):
    x = load_batch(step)
    dist.all_reduce(x)
    if step % 10 == 0:
        print(f"rank {rank} step {step}", flush=True)
print(f"rank {rank} done", flush=True)
dist.destroy_process_group()
os._exit(0)  # torch 2.13 CPU + gloo aborts at interpreter exit in ~1 run in 4 (see the README); not our topic here
