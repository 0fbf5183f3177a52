"""A plain torch.distributed script (gloo, CPU) that knows nothing of cockpit and prints its progress the way
hand-written loops do: ``step N loss=X lr=Y`` on every rank, among ordinary lines (a config dict, a greeting)
that must not be read as metrics. tests/plot/test_own_metrics.py runs it through `cockpit run`."""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    print(f"rank {rank} of {dist.get_world_size()} ready", flush=True)
    print({"lr": 0.001, "batch": 8, "seed": 0}, flush=True)  # a config dump: not a metric
    torch.manual_seed(0)
    model = DDP(nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    x = torch.randn(64, 8)
    y = x.sum(dim=1, keepdim=True)
    for step in range(1, args.steps + 1):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss={loss.item():.4f} lr=0.001", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
