"""A plain DDP training loop, without cockpit.train, that a relaunch (the job's `recover:`) resumes.

What a script must do to heal: save a checkpoint now and then under $COCKPIT_RUN_DIR (the same directory in
every attempt of the run) and, at its start, load it if it is there. $COCKPIT_ATTEMPT says which attempt this
is (0 the first start, 1 the first relaunch, ...), for the logs or for failure injection as here.
    cockpit run jobs/plain_resume.yaml
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--checkpoint-every", type=int, default=5)
    parser.add_argument("--fail-step", type=int, default=None, help="rank 1 raises after this many steps")
    parser.add_argument("--fail-attempts", type=int, default=None, help="only while COCKPIT_ATTEMPT < this")
    args = parser.parse_args()
    attempt = int(os.environ.get("COCKPIT_ATTEMPT", "0"))
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    path = os.path.join(os.environ.get("COCKPIT_RUN_DIR", "."), "checkpoints", "plain.pt")
    start = 0
    if os.path.exists(path):  # a relaunch (or a rerun in the same directory): resume where the last save was
        state = torch.load(path)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
    print(f"[plain] rank {rank} attempt {attempt} starts at step {start}", flush=True)
    for step in range(start, args.steps):
        failing = args.fail_attempts is None or attempt < args.fail_attempts
        if rank == 1 and step == args.fail_step and failing:
            raise RuntimeError(f"injected failure after step {step} (attempt {attempt})")
        loss = model(torch.randn(16, 8)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (step + 1) % args.checkpoint_every == 0 and rank == 0:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step + 1}
            torch.save(state, path + ".tmp")
            os.replace(path + ".tmp", path)  # atomic: a kill mid-save leaves the old checkpoint
    print(f"[plain] rank {rank} done at step {args.steps}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # gloo can abort in interpreter teardown (torch 2.x); the work is done


if __name__ == "__main__":
    main()
