"""Uneven inputs: a DDP run (gloo) whose ranks get different numbers of batches (rank --long-rank gets
--extra more). The ranks that run out first leave the loop and wait in a final barrier; the long rank waits in
backward for its extra batch's gradient all-reduce, which nobody else joins."""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--batches", type=int, default=30)
p.add_argument("--long-rank", type=int, default=0)
p.add_argument("--extra", type=int, default=1)
args = p.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
model = nn.parallel.DistributedDataParallel(nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
batches = args.batches + (args.extra if rank == args.long_rank else 0)


def train() -> None:
    for step in range(batches):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"rank {rank} step {step}", flush=True)


train()
dist.barrier()  # the ranks that ran out of data wait here for the long one
print(f"rank {rank} done", flush=True)
os._exit(0)
