"""A healthy DDP run (gloo, no cockpit.train) in which rank 0 alone evaluates now and then while the other
ranks go on to their next step and wait for it in backward: --eval-every N steps, --eval-s seconds of forward
passes each time. --quiet-start S: every rank loads for S seconds first (no output, no collective)."""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=300)
p.add_argument("--step-ms", type=float, default=20.0)
p.add_argument("--eval-every", type=int, default=100)
p.add_argument("--eval-s", type=float, default=4.0)
p.add_argument("--quiet-start", type=float, default=0.0)
args = p.parse_args()


def load_everything(seconds: float) -> None:
    time.sleep(seconds)  # reading a dataset, a checkpoint: long, silent, no collective yet


def evaluate(model: nn.Module, seconds: float) -> float:
    """Forward passes on held-out data for ``seconds``: rank 0 only, the others wait in their next step."""
    end, total = time.monotonic() + seconds, 0.0
    with torch.no_grad():
        while time.monotonic() < end:
            total += float(model.module(torch.randn(64, 16)).mean())
            time.sleep(0.01)
    return total


load_everything(args.quiet_start)
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1, args.steps + 1):
    time.sleep(args.step_ms / 1000)
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 50 == 0:
        print(f"rank {rank} step {step}", flush=True)
    if rank == 0 and step % args.eval_every == 0 and step < args.steps:
        evaluate(model, args.eval_s)
print(f"rank {rank} done", flush=True)
dist.destroy_process_group()
os._exit(0)  # torch 2.13 CPU + gloo aborts at interpreter exit in ~1 run in 4 (see the README); not our topic here
