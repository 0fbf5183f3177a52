"""A plain gloo script whose rank 1 runs out of memory in its cgroup (cgroup v1's memory controller), for
test_oom_real.py: the kernel's OOM killer, not a test, ends it.

    oom_rank.py grow   rank 1 fills its cgroup to 64 MiB under the limit, then grows 2 MiB a step: its last
                       beat (each second) is at most ~40 MiB behind what it held when killed
    oom_rank.py burst  rank 1 allocates the cgroup's whole limit at once, after a beat that shows it small

Rank 1 raises its own oom_score_adj to 1000 (no capability needed), so the OOM killer picks it over whatever
else is in the cgroup (a test's memory hog, torchrun, rank 0)."""

import os
import sys
import time

import torch
import torch.distributed as dist

MIB = 1 << 20


def cgroup_file(name: str) -> str:
    with open("/proc/self/cgroup", encoding="utf-8") as f:
        for line in f:
            _id, controllers, path = line.rstrip("\n").split(":", 2)
            if "memory" in controllers.split(","):
                return os.path.join("/sys/fs/cgroup/memory", path.lstrip("/"), name)
    raise SystemExit("oom_rank.py: not in a cgroup v1 memory cgroup")


def read_int(name: str) -> int:
    with open(cgroup_file(name), encoding="utf-8") as f:
        return int(f.read())


def main() -> None:
    mode = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    print(f"[oom_rank] rank {rank} up ({mode})", flush=True)
    held: list[bytes] = []
    for step in range(100_000):
        dist.all_reduce(torch.ones(4))
        print(f"step={step}", flush=True)
        time.sleep(0.05)
        if rank != 1 or step < 20:  # a second of steps first: every rank has beaten with the OOM-kill count
            continue
        if not held:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")
            room = read_int("memory.limit_in_bytes") - read_int("memory.usage_in_bytes")
            size = room - 64 * MIB if mode == "grow" else read_int("memory.limit_in_bytes")
            print(f"[oom_rank] allocating {size // MIB} MiB ({room // MIB} MiB left in the cgroup)", flush=True)
            held.append(b"\1" * max(size, MIB))  # one C call: no beat while it fills
        elif mode == "grow":
            held.append(b"\1" * (2 * MIB))


if __name__ == "__main__":
    main()
