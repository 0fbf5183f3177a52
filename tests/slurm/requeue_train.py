"""Training script for the requeue test (run by the test cluster's srun; uses cockpit.train like jobs/demo.py).

The first attempt sleeps after every step, so it is surely still training when the time-limit USR1 comes,
however fast this machine is; a requeued attempt (SLURM_RESTART_COUNT > 0) runs at full speed, so the test
does not wait for a second slow attempt.

    requeue_train.py --steps 600 --sleep 0.1
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch import nn
from torch.utils.data import TensorDataset

from cockpit.train import Runtime


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=600, help="optimizer steps per rank")
    p.add_argument("--sleep", type=float, default=0.1, help="seconds after each step, first attempt only")
    args = p.parse_args()
    first_attempt = os.environ.get("SLURM_RESTART_COUNT", "0") == "0"

    rt = Runtime.from_env()
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = rt.setup(model, optimizer)
    g = torch.Generator().manual_seed(0)
    n = args.steps * 4 * rt.world_size
    loader = rt.loader(TensorDataset(torch.randn(n, 8, generator=g), torch.randn(n, 1, generator=g)), batch_size=4)
    for _ in rt.epochs(1):
        for x, y in rt.batches(loader):
            loss = nn.functional.mse_loss(model(x), y)
            rt.backward(loss, optimizer)
            rt.step(loss, samples=len(x))
            if first_attempt:
                time.sleep(args.sleep)
    rt.print(f"[requeue_train] finished at step {rt.position.step}")
    rt.save_checkpoint()
    rt.finish()


if __name__ == "__main__":
    main()
