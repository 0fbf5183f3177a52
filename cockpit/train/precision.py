"""Mixed precision: one small object that knows the autocast context and the backward/step recipe.

* fp32: no autocast, plain ``loss.backward(); optimizer.step()``.
* bf16: ``torch.autocast(device, bfloat16)`` on CPU or CUDA; no scaler (bf16 has fp32's exponent range).
* fp16: ``torch.autocast(device, float16)`` plus a ``GradScaler`` (fp16 gradients underflow without one), on
  CUDA or, with torch >= 2.3, the CPU (``GradScaler("cpu")``). Under fsdp the scaler is FSDP's
  ``ShardedGradScaler``: each rank sees only its shard's gradients, so it all-reduces "found inf" and every rank
  skips the same steps.

DataParallel runs each replica's forward in a thread of its own, and autocast state (on/off AND dtype) is
thread-local: the caller's ``with rt.autocast()`` does not reach the replicas (torch re-enters autocast there
with the device's default dtype, fp16 on CUDA, so bf16 silently became fp16). :class:`AutocastForward` enters
autocast inside the forward itself, the recipe of the torch AMP notes; the runtime wraps the module in it
under dp.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import torch
from torch import nn

from cockpit.train.config import ConfigError

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager[Any]:
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=DTYPES[precision])


def cpu_fp16_problem() -> str | None:
    """Why this torch cannot train fp16 on the CPU (None: it can): it needs fp16 autocast and GradScaler("cpu").

    Asked of torch itself rather than its version number: an older torch warns and turns autocast off.
    """
    if not hasattr(torch.amp, "GradScaler"):
        return f"torch {torch.__version__} has no torch.amp.GradScaler (CPU gradient scaling needs torch >= 2.3)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autocast(device_type="cpu", dtype=torch.float16):
            dtype = torch.mm(torch.ones(1, 1), torch.ones(1, 1)).dtype
    if dtype != torch.float16:
        return f"torch {torch.__version__} has no fp16 autocast on the CPU"
    return None


class Precision:
    """Autocast + optional GradScaler for one precision on one device (``sharded``: the model is FSDP's)."""

    def __init__(self, precision: str, device: torch.device, *, sharded: bool = False) -> None:
        self.precision = precision
        self.device = device
        self.scaler: torch.amp.GradScaler | None = None
        if precision != "fp16":
            return
        problem = cpu_fp16_problem() if device.type == "cpu" else None
        if problem:
            raise ConfigError(f"COCKPIT_PRECISION=fp16 on the CPU: {problem}; "
                              "hint: use bf16 on the CPU, or upgrade torch")
        if sharded:
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

            self.scaler = ShardedGradScaler(device=device.type)
        else:
            self.scaler = torch.amp.GradScaler(device.type)

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Run the forward pass (and loss) inside this; a no-op for fp32."""
        return _autocast(self.precision, self.device)

    def backward_and_step(self, loss: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
        """Backward, optimizer step (through the scaler under fp16), then zero the gradients."""
        if self.scaler is None:
            loss.backward()
            optimizer.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(optimizer)
            self.scaler.update()
        optimizer.zero_grad(set_to_none=True)

    def state_dict(self) -> dict[str, Any] | None:
        """The scaler's state (None without a scaler), for checkpoints."""
        return self.scaler.state_dict() if self.scaler is not None else None

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Restore the scaler's state; a checkpoint without one leaves the fresh scaler as it is."""
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)


class AutocastForward(nn.Module):
    """``module`` whose forward runs inside autocast, in whatever thread calls it (DataParallel's replicas).

    Its state_dict keys carry a ``module.`` prefix; the runtime checkpoints the module inside, not this.
    """

    def __init__(self, module: nn.Module, precision: str, device: torch.device) -> None:
        super().__init__()
        self.module = module
        self.precision = precision
        self.device_type = device.type

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        with _autocast(self.precision, torch.device(self.device_type)):
            return self.module(*args, **kwargs)

