"""Process group start/stop and the few collectives the runtime needs.

Every function here is a no-op (or the single-process answer) when no process group is running, so the
runtime calls them the same way under ddp, dp and a single process.
"""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist

from cockpit.train.config import RuntimeConfig


def pick_device(cfg: RuntimeConfig) -> torch.device:
    """cuda:LOCAL_RANK under ddp/fsdp + nccl, cuda:0 under dp with CUDA, else cpu."""
    if not torch.cuda.is_available():
        return torch.device("cpu")
    if cfg.distributed and cfg.pg_backend == "nccl":
        return torch.device("cuda", cfg.local_rank)
    if cfg.backend == "dp":
        return torch.device("cuda", 0)
    return torch.device("cpu")  # ddp/fsdp + gloo: CPU training even where a GPU exists


def start(cfg: RuntimeConfig, device: torch.device, timeout_s: float = 1800.0) -> None:
    """Start the process group for ddp and fsdp (any world size); nothing for dp.

    torchrun's workers use ``env://`` (that also reuses the agent's store); the Slurm fallback rendezvous
    at tcp://MASTER_ADDR:MASTER_PORT; a single process uses an in-memory store (no port needed).
    """
    if not cfg.distributed or dist.is_initialized():
        return
    if device.type == "cuda":
        torch.cuda.set_device(device)  # before any collective, so NCCL and *_object collectives use it
    timeout = timedelta(seconds=timeout_s)
    if cfg.launcher == "torchrun":
        dist.init_process_group(cfg.pg_backend, init_method="env://", timeout=timeout)
    elif cfg.launcher == "slurm":
        dist.init_process_group(
            cfg.pg_backend, init_method=f"tcp://{cfg.master_addr}:{cfg.master_port}",
            rank=cfg.rank, world_size=cfg.world_size, timeout=timeout,
        )
    else:
        dist.init_process_group(cfg.pg_backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)


def running() -> bool:
    """True when a process group is up."""
    return dist.is_available() and dist.is_initialized()


def any_rank(flag: bool, device: torch.device) -> bool:
    """True on every rank when ``flag`` is True on at least one rank (all-reduce MAX)."""
    if not running():
        return flag
    tensor = torch.tensor([1 if flag else 0], dtype=torch.int32, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return bool(tensor.item())


def gather_objects(obj: object) -> list[object]:
    """Every rank's ``obj``, indexed by rank (a one-element list without a process group)."""
    if not running():
        return [obj]
    out: list[object] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def barrier(device: torch.device) -> None:
    """Wait for every rank (no-op without a process group); NCCL is told the device to sync on."""
    if not running():
        return
    if device.type == "cuda" and dist.get_backend() == "nccl":
        dist.barrier(device_ids=[device.index])
    else:
        dist.barrier()


def stop() -> None:
    """Destroy the process group if one is up."""
    if running():
        dist.destroy_process_group()
