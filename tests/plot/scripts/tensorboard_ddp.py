"""A plain torch.distributed script (gloo, CPU) that logs its loss to TensorBoard with
torch.utils.tensorboard.SummaryWriter and prints none of it, in the two ways scripts do: rank 0 with a default
``SummaryWriter()`` (``runs/<date>_<host>/`` in its working directory, tag ``Loss/train``, the PyTorch
tutorial's), and every other rank a writer of its own under ``$COCKPIT_RUN_DIR/tb/rank-R`` (tag ``loss``).
tests/plot/test_own_metrics.py runs it through `cockpit run`."""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.tensorboard import SummaryWriter


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if rank == 0:
        writer, tag = SummaryWriter(), "Loss/train"
    else:
        writer, tag = SummaryWriter(os.path.join(os.environ["COCKPIT_RUN_DIR"], "tb", f"rank-{rank}")), "loss"
    torch.manual_seed(rank)
    model = DDP(nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    x = torch.randn(64, 8)
    y = x.sum(dim=1, keepdim=True)
    for step in range(1, args.steps + 1):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        writer.add_scalar(tag, loss.item(), step)
        writer.add_scalar("lr", 0.001, step)
    writer.close()
    print(f"rank {rank} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
