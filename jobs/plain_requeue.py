"""A plain DDP training loop, without cockpit.train, that checkpoints and requeues on a stop signal.

With `slurm.requeue: true` the ranks get SIGUSR1 before the time limit (SIGTERM at it, and from `cockpit stop`);
cockpit.requeue turns both into a flag. The ranks agree on it once per step (one tiny all_reduce: a rank that
got no signal stops too, at the same step), rank 0 saves, and `requeue_or_exit()` requeues (rank 0, when the
job asked for it) and exits 0. The next start resumes from the checkpoint.
    cockpit run job.yaml     # with script: plain_requeue.py
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import cockpit.requeue


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--step-seconds", type=float, default=0.02)
    args = parser.parse_args()
    stop = cockpit.requeue.watch()  # first: until then USR1's default action kills the process
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    path = os.path.join(os.environ.get("COCKPIT_RUN_DIR", "."), "checkpoints", "plain.pt")
    start = 0
    if os.path.exists(path):  # a requeued job starts again from the top: resume
        state = torch.load(path)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
    print(f"[plain] rank {rank} ready at step {start}", flush=True)
    for step in range(start, args.steps):
        loss = model(torch.randn(16, 8)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        flag = torch.tensor([int(stop.requested)])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)  # the ranks agree: any rank's signal stops every rank
        if flag.item():
            if rank == 0:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step + 1}
                torch.save(state, path + ".tmp")
                os.replace(path + ".tmp", path)  # atomic: a kill mid-save leaves the old checkpoint
            dist.barrier()  # nobody leaves before the checkpoint is on disk
            print(f"[plain] rank {rank} stopping after step {step + 1}", flush=True)
            dist.destroy_process_group()
            stop.requeue_or_exit()
        time.sleep(args.step_seconds)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
