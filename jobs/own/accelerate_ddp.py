"""An accelerate script, as people write it: `Accelerator()` with no arguments, no cockpit import.

Under torchrun (or cockpit's sbatch form) Accelerator() reads RANK / LOCAL_RANK / WORLD_SIZE from the
environment: with GPUs it picks MULTI_GPU with nccl; on CPU only when ACCELERATE_USE_CPU=1 (the job file sets
it; `accelerate launch --cpu` does the same), then MULTI_CPU with gloo; without it every process trains alone.
prepare() wraps the model in DistributedDataParallel and shards the DataLoader across the processes.

    accelerate launch --num_processes 2 --cpu accelerate_ddp.py      (or torchrun, or cockpit run)
    cockpit run jobs/own/accelerate_ddp.yaml -- --fail-rank 1         # rank 1 raises at step 5
"""

import argparse

import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--fail-rank", type=int, default=-1, help="this process raises at --fail-step")
    p.add_argument("--fail-step", type=int, default=5)
    args = p.parse_args()

    accelerator = Accelerator()
    rank = accelerator.process_index
    print(f"accelerate: process {rank} of {accelerator.num_processes} ({accelerator.distributed_type}, "
          f"{accelerator.state.backend}) on {accelerator.device}", flush=True)

    torch.manual_seed(0)
    x = torch.randn(512, 16)
    data = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model, opt, data = accelerator.prepare(model, opt, data)

    step = 0
    for epoch in range(args.epochs):
        for xb, yb in data:
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            accelerator.backward(loss)
            opt.step()
            step += 1
            if rank == args.fail_rank and step == args.fail_step:
                raise RuntimeError(f"accelerate: process {rank} failed on purpose at step {step}")
            if step % 4 == 0:
                print(f"accelerate: process {rank} epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
    accelerator.wait_for_everyone()
    print(f"accelerate: process {rank} done after {step} steps", flush=True)
    accelerator.end_training()


if __name__ == "__main__":
    main()
