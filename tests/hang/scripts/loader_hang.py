"""A DDP run (gloo) whose input comes from a DataLoader with worker processes. On --stuck-rank, the Dataset's
__getitem__ for sample --stuck-index opens a FIFO nobody writes (a read that never returns, as on a hung
network file system): that rank's worker blocks there, the rank waits for it at `for x in loader`, and the
other ranks wait for the rank in backward."""

import argparse
import os
import tempfile
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--stuck-rank", type=int, default=1)
p.add_argument("--stuck-index", type=int, default=40)
p.add_argument("--workers", type=int, default=2)
args = p.parse_args()


class Samples(Dataset):
    def __init__(self, rank: int):
        self.rank = rank
        self.fifo = os.path.join(tempfile.mkdtemp(prefix="cockpit-loader-"), "never-written")
        os.mkfifo(self.fifo)

    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, index: int) -> torch.Tensor:
        if self.rank == args.stuck_rank and index == args.stuck_index:
            with open(self.fifo, "rb") as f:  # blocks: nobody opens the other end
                f.read()
        time.sleep(0.002)
        return torch.randn(16)


dist.init_process_group("gloo")
rank = dist.get_rank()
model = nn.parallel.DistributedDataParallel(nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Samples(rank), batch_size=4, num_workers=args.workers)
for step, x in enumerate(loader):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 5 == 0:
        print(f"rank {rank} step {step}", flush=True)
print(f"rank {rank} done", flush=True)
os._exit(0)
