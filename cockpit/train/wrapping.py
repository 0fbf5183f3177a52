"""The model and optimizer of one rank: wrapped for the backend, and into and out of checkpoints.

* ddp: DistributedDataParallel; dp: DataParallel (with autocast inside each replica's forward under fp16/bf16,
  see cockpit.train.precision); fsdp: FSDP2's fully_shard (cockpit.train.fsdp).
* ddp / dp checkpoints hold the whole state_dicts in ``latest.pt`` (rank 0 writes them); fsdp ones hold each
  rank's shards in ``checkpoints/sharded-<step>/`` (DCP), which ``latest.pt`` names (cockpit.train.checkpoint).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from cockpit.train import checkpoint as ckpt
from cockpit.train import fsdp
from cockpit.train.config import RuntimeConfig
from cockpit.train.precision import AutocastForward


def wrap(model: nn.Module, cfg: RuntimeConfig, device: torch.device) -> nn.Module:
    """``model`` (already on ``device``) wrapped for ``cfg.backend``; fsdp shards it in place."""
    if cfg.backend == "fsdp":
        return fsdp.shard(model, None, cfg.precision)
    if cfg.backend == "dp":
        inner = model if cfg.precision == "fp32" else AutocastForward(model, cfg.precision, device)
        return nn.DataParallel(inner)  # on CPU it simply calls the module
    device_ids = [device.index] if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)


def setup(model: nn.Module, optimizer: torch.optim.Optimizer, cfg: RuntimeConfig, device: torch.device,
          payload: dict[str, Any] | None, where: Path | None) -> nn.Module:
    """Wrap ``model`` and load ``payload`` (the latest checkpoint of ``where``, or None) into it and
    ``optimizer``; under fsdp the optimizer's param groups are pointed at the sharded parameters."""
    ckpt.check_kind(payload, cfg.backend == "fsdp", where / ckpt.LATEST if where else Path())
    if cfg.backend == "fsdp":
        wrapped = fsdp.shard(model, optimizer, cfg.precision)
        if payload is not None and where is not None:
            fsdp.load(where / payload["sharded"], model, optimizer)
        return wrapped
    if payload is not None:
        model.load_state_dict(payload["model"])
        optimizer.load_state_dict(payload["optimizer"])
    return wrap(model, cfg, device)


def add_state(payload: dict[str, Any], model: nn.Module, optimizer: torch.optim.Optimizer, cfg: RuntimeConfig,
              where: Path) -> None:
    """Put model and optimizer into the checkpoint ``payload`` (call it on ALL ranks: under fsdp every rank
    writes its shards into ``checkpoints/sharded-<step>/`` here, and the payload gets that name)."""
    if cfg.backend == "fsdp":
        shards = ckpt.sharded_dir(where, payload["step"])
        fsdp.save(shards, model, optimizer)
        payload["sharded"] = shards.name
    elif cfg.is_main:
        payload.update(model=model.state_dict(), optimizer=optimizer.state_dict())


def full_state_dict(model: nn.Module, cfg: RuntimeConfig) -> dict[str, torch.Tensor]:
    """The unwrapped model's whole state_dict on every rank (under fsdp a collective that gathers shards)."""
    return fsdp.full_state_dict(model) if cfg.backend == "fsdp" else model.state_dict()
