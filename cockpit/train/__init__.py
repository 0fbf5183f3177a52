"""The training runtime: the only package in cockpit that imports torch.

A training script needs one import::

    from cockpit.train import Runtime

Modules, one job each: ``config`` (environment contract -> RuntimeConfig, pure), ``dist`` (process group),
``data`` (sharded, resumable loader), ``precision`` (autocast + GradScaler), ``wrapping`` (DDP / DP / FSDP
wrap, model state in and out of checkpoints), ``fsdp`` (FSDP2 sharding, DCP), ``checkpoint`` (atomic save,
RNG states), ``metrics`` (JSON lines per rank), ``stop`` (signals, Slurm requeue), ``runtime`` (ties them).
"""

from cockpit.train.config import ConfigError, RuntimeConfig
from cockpit.train.runtime import Runtime

__all__ = ["ConfigError", "Runtime", "RuntimeConfig"]
