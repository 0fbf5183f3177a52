"""A plain DDP training script (no cockpit.train) with the faults users write by accident, one per --case:

  raise        rank --rank raises ValueError after step --step (its peers wait in DDP's all-reduce)
  early_exit   rank --rank stops after step --step and ends its script (exit 0): local early stopping
  op           after step --step rank --rank all_reduces its loss for logging, a collective the others do not
               call: it meets their next gradient all-reduce (gloo aborts: "Is there a distributed collective
               mismatch"; a different op of the same size hangs instead, which cockpit.hang names)
  shape        at step --step rank --rank all_reduces 8 numbers where the others all_reduce 4
  uneven       rank --rank has fewer batches than the others; every rank all_reduces its mean loss at the end
  stuck        rank --rank blocks in its own code (a data reader) before step --step + 1: a hang
  none         a healthy run

Each step sleeps --step-ms so the ranks are mid-collective when the fault comes. The tests find lines by their
marker comments (# BACKWARD, ...). A healthy end leaves with os._exit(0) after destroy_process_group: torch 2.13
+ gloo on CPU can abort at interpreter exit (see the README), which is not this script's subject."""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

p = argparse.ArgumentParser()
p.add_argument("--case", default="none")
p.add_argument("--rank", type=int, default=1)
p.add_argument("--step", type=int, default=5)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--step-ms", type=float, default=20.0)
args = p.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
faulty = rank == args.rank
batches = args.step if args.case == "uneven" and faulty else args.steps


def train() -> float:
    total = 0.0
    for step in range(batches):
        time.sleep(args.step_ms / 1000)
        while faulty and args.case == "stuck" and step == args.step:
            time.sleep(1)  # STUCK: a data reader that never returns
        loss = model(torch.randn(8, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # BACKWARD
        opt.step()
        total += loss.item()
        print(f"rank {rank} step {step + 1} loss {loss.item():.4f}", flush=True)
        if faulty and step + 1 == args.step:
            if args.case == "raise":
                raise ValueError(f"bad batch at step {step + 1}")
            if args.case == "early_exit":
                print(f"rank {rank}: loss is low enough, stopping early", flush=True)
                return total
            if args.case == "op":
                dist.all_reduce(loss.detach())  # OP
            if args.case == "shape":
                dist.all_reduce(torch.ones(8))  # SHAPE8
        elif args.case == "shape" and step + 1 == args.step:
            dist.all_reduce(torch.ones(4))  # SHAPE4
    return total


total = train()
if faulty and args.case == "early_exit":
    raise SystemExit(0)
mean = torch.tensor([total / batches])
dist.all_reduce(mean)  # AFTER_LOOP
print(f"rank {rank} done, mean loss {mean.item() / dist.get_world_size():.4f}", flush=True)
dist.destroy_process_group()
os._exit(0)
