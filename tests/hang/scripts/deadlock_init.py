"""A deadlock before init_process_group, as in "download the data once, under a file lock": rank --holder
takes the lock and goes on into init_process_group, where it waits for the other ranks; they wait for the
lock it never releases."""

import argparse
import fcntl
import os
import time

import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--holder", type=int, default=0)
args = p.parse_args()
rank = int(os.environ["RANK"])
lock_path = os.path.join(os.environ.get("COCKPIT_RUN_DIR", "/tmp"), "dataset.lock")
taken = lock_path + ".taken"


def prepare_dataset() -> None:
    """The holder takes the lock (and keeps it: the bug); the others wait until it is taken, then for it."""
    with open(lock_path, "a") as f:
        if rank != args.holder:
            while not os.path.exists(taken):
                time.sleep(0.05)
        fcntl.flock(f, fcntl.LOCK_EX)  # the others block here for ever
        if rank == args.holder:
            open(taken, "w").close()
            os.dup(f.fileno())  # the holder keeps the lock past the `with`


prepare_dataset()
dist.init_process_group("gloo")
dist.barrier()
print(f"rank {rank} initialised", flush=True)
os._exit(0)
