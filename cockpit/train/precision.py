"""Mixed precision: one small object that knows the autocast context and the backward/step recipe.

* fp32: no autocast, plain ``loss.backward(); optimizer.step()``.
* bf16: ``torch.autocast(device, bfloat16)`` on CPU or CUDA; no scaler (bf16 has fp32's exponent range).
* fp16: ``torch.autocast("cuda", float16)`` plus a ``GradScaler`` (fp16 gradients underflow without one);
  CUDA only, which RuntimeConfig checks before we get here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


class Precision:
    """Autocast + optional GradScaler for one precision on one device."""

    def __init__(self, precision: str, device: torch.device) -> None:
        self.precision = precision
        self.device = device
        self.scaler: torch.amp.GradScaler | None = (
            torch.amp.GradScaler("cuda") if precision == "fp16" else None
        )

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        """Run the forward pass (and loss) inside this; a no-op for fp32."""
        if self.precision == "fp32":
            yield
            return
        with torch.autocast(device_type=self.device.type, dtype=DTYPES[self.precision]):
            yield

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
