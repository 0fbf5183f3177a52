"""A script that starts its own ranks with torch.multiprocessing.spawn, as people write it without cockpit.

cockpit runs it once per node with `runner: spawn` (jobs/own/spawn.yaml): the script reads NODE_RANK and
WORLD_SIZE (set by cockpit, or by you when you run it by hand) and spawns `nprocs` ranks on this node. Each
spawned rank gets its own log and exit record. FAIL_RANK=R makes rank R fail at epoch 1: FAIL_MODE=raise (a
Python exception, the default) or kill (SIGKILL, as the OOM killer would).
"""

import os
import signal
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def train(local_rank: int, nprocs: int, epochs: int) -> None:
    rank = int(os.environ.get("NODE_RANK", "0")) * nprocs + local_rank
    world_size = int(os.environ.get("WORLD_SIZE", nprocs))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(256, 16), torch.randn(256, 1))
    loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data))
    model = DistributedDataParallel(torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"spawned rank {rank} epoch {epoch} loss {loss.item():.4f}")
        if os.environ.get("FAIL_RANK") == str(rank) and epoch == 1:
            if os.environ.get("FAIL_MODE") == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"rank {rank} failed on purpose")
    dist.destroy_process_group()


if __name__ == "__main__":
    nprocs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    print(f"spawning {nprocs} processes")
    mp.spawn(train, args=(nprocs, epochs), nprocs=nprocs)
