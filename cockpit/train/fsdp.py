"""backend fsdp: FSDP2 (``torch.distributed.fsdp.fully_shard``) sharding and sharded checkpoints (DCP).

Each rank holds 1/world of every parameter, gradient and optimizer state; a layer's full parameters exist only
while it runs (all-gather before, reduce-scatter of the gradients after). The units: every child of an
``nn.Sequential`` / ``nn.ModuleList`` in the model (the usual stack of blocks) that has parameters, then the
root, so one unit is gathered at a time and the next one's all-gather overlaps the current one's compute.

fully_shard replaces every parameter with a new DTensor Parameter, so an optimizer built over
``model.parameters()`` before :func:`shard` would step tensors nobody uses. :func:`shard` points the
optimizer's param groups at the new parameters, matched by name (the same swap Hugging Face Accelerate does),
which keeps ``rt.setup(model, optimizer)`` one call for ddp, dp and fsdp.

Mixed precision under fsdp is FSDP2's ``MixedPrecisionPolicy``: parameters are gathered and computed in the
16-bit dtype and gradients reduce-scattered in fp32 into the fp32 shards (plus autocast, as with ddp).

Checkpoints: ``torch.distributed.checkpoint`` (DCP) writes each rank's shards into one directory with a
``.metadata`` file; a later run loads them into its own shards, whatever its world size (DCP reshards).
Requires torch >= 2.6 (FSDP2 public as ``torch.distributed.fsdp.fully_shard``); all of it works on the CPU
with gloo (all_gather_into_tensor, reduce_scatter_tensor and all_reduce: checked on torch 2.13).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_state_dict,
)

from cockpit.train.config import ConfigError
from cockpit.train.precision import DTYPES


def _fully_shard() -> tuple[Any, Any]:
    """(fully_shard, MixedPrecisionPolicy), or ConfigError naming this torch when it has no FSDP2."""
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    except ImportError as exc:
        raise ConfigError(
            f"COCKPIT_BACKEND=fsdp needs FSDP2 (torch.distributed.fsdp.fully_shard, torch >= 2.6); this is "
            f"torch {torch.__version__} ({exc}); hint: upgrade torch, or use backend: ddp"
        ) from None
    return fully_shard, MixedPrecisionPolicy


def units(model: nn.Module) -> list[nn.Module]:
    """The modules that become FSDP units before the root, children before their parents."""
    found: list[nn.Module] = []
    for module in model.modules():
        if isinstance(module, nn.Sequential | nn.ModuleList):
            found += [c for c in module.children() if any(True for _ in c.parameters())]
    unique = {id(m): m for m in found}  # a module in two containers is one unit
    order = {id(m): i for i, m in enumerate(model.modules())}
    return sorted(unique.values(), key=lambda m: -order[id(m)])  # reverse pre-order: descendants first


def shard(model: nn.Module, optimizer: torch.optim.Optimizer | None, precision: str) -> nn.Module:
    """Apply fully_shard to ``model`` (in place; returned for symmetry with DDP) and rebind ``optimizer``."""
    fully_shard, policy_type = _fully_shard()
    names = {id(p): name for name, p in model.named_parameters()}
    if optimizer is not None:
        _check_optimizer(optimizer, names)
    dtype = DTYPES.get(precision)
    policy = policy_type(param_dtype=dtype, reduce_dtype=torch.float32) if dtype else policy_type()
    for unit in units(model):
        fully_shard(unit, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    if optimizer is not None:
        sharded = dict(model.named_parameters())
        for group in optimizer.param_groups:
            group["params"] = [sharded[names[id(p)]] for p in group["params"]]
    return model


def _check_optimizer(optimizer: torch.optim.Optimizer, names: dict[int, str]) -> None:
    if optimizer.state:
        raise RuntimeError(
            "rt.setup(): under backend fsdp the optimizer must not have stepped yet (its state would be lost "
            "when fully_shard replaces the parameters); hint: call rt.setup before the first step"
        )
    for group in optimizer.param_groups:
        if any(id(p) not in names for p in group["params"]):
            raise RuntimeError(
                "rt.setup(): the optimizer holds a tensor that is not a parameter of the model, which FSDP "
                "cannot shard; hint: build the optimizer over model.parameters()"
            )


def full_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The whole (unsharded) state_dict on the CPU, on every rank. A collective: call it on ALL ranks."""
    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
    return {k: v.detach().cpu() for k, v in state.items()}


def save(directory: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Write this rank's shards of model and optimizer into ``directory`` (a collective: ALL ranks call it).

    DCP's coordinator (rank 0) writes ``.metadata`` after every rank reported its files written, so when
    this returns on rank 0 the directory is complete.
    """
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optimizer": optim_state}, checkpoint_id=str(directory))


def load(directory: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Load ``directory`` (from :func:`save`, any world size) into this rank's shards (ALL ranks call it)."""
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optimizer": optim_state}
    try:
        dcp.load(state, checkpoint_id=str(directory))
    except Exception as exc:
        raise RuntimeError(
            f"cannot load the sharded checkpoint {directory}: {exc}; hint: move checkpoints/ away to start "
            "from scratch, or check the model is the one that was trained"
        ) from exc
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
