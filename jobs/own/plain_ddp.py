"""A plain torch.distributed DDP script, as people write it for torchrun: no cockpit import.

torchrun (or cockpit's sbatch form) gives each process RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT; init_process_group reads them (env://). Gloo on CPU, nccl when the job has GPUs.

    torchrun --nproc-per-node=2 plain_ddp.py --steps 20
    cockpit run jobs/own/plain_ddp.yaml -- --fail-rank 1      # rank 1 raises at step 5
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--fail-rank", type=int, default=-1, help="this rank raises at --fail-step")
    p.add_argument("--fail-step", type=int, default=5)
    args = p.parse_args()

    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    print(f"plain: rank {rank} of {world} (local {local_rank}) on {device}", flush=True)

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device),
                device_ids=[local_rank] if use_cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)  # each rank its own shard of synthetic data
    for step in range(1, args.steps + 1):
        x = torch.randn(32, 16, generator=g).to(device)
        y = x.sum(dim=1, keepdim=True)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == args.fail_rank and step == args.fail_step:
            raise RuntimeError(f"plain: rank {rank} failed on purpose at step {step}")
        if step % 5 == 0:
            print(f"plain: rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    dist.barrier()
    print(f"plain: rank {rank} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
