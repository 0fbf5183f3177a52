"""Checkpoints: one file, ``<run_dir>/checkpoints/latest.pt``, replaced atomically.

Why one file and not ``ckpt-<step>.pt`` plus a pointer: a pointer and its target can disagree after a crash;
``os.replace`` of one file cannot. The file is written to a temp name in the same directory, fsync'ed, then
renamed over ``latest.pt`` and the directory fsync'ed, so a reader sees the old checkpoint or the new one,
never half of one.

Contents (a plain dict, loadable with ``torch.load(..., weights_only=True)``):
``format``, ``step`` (optimizer steps done), ``epoch`` and ``batch_in_epoch`` (where the data stream is),
``world_size``, ``model`` (the unwrapped module's state_dict), ``optimizer``, ``scaler`` (or None) and
``rng`` (one entry per rank: torch, cuda, numpy, python ``random``).

Under fsdp, model and optimizer are sharded: every rank writes its shards with DCP into
``checkpoints/sharded-<step>/`` first, and only then does rank 0 replace ``latest.pt``, which holds
``sharded`` (that directory's name) instead of ``model`` and ``optimizer``. ``latest.pt`` therefore only
ever names a complete directory; older directories (and one a crash left half-written) are deleted after the
replace. One atomic file stays the single answer to "where do we resume".
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cockpit.run import layout

FORMAT = 1
LATEST = "latest.pt"
SHARDED_PREFIX = "sharded-"


@dataclass(frozen=True)
class Position:
    """Where training stands: ``step`` optimizer steps done, ``batch_in_epoch`` of them in ``epoch``."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0


def checkpoint_dir(run_dir: Path) -> Path:
    """``<run_dir>/checkpoints``."""
    return run_dir / layout.CHECKPOINTS


def rng_state() -> dict[str, Any]:
    """This process's RNG states, in types ``torch.load(weights_only=True)`` accepts (no numpy arrays)."""
    state = np.random.get_state(legacy=True)  # what get_state() returns: a tuple for the global MT19937
    if isinstance(state, dict):
        raise RuntimeError("numpy's global random state is not MT19937's; cannot save it as a tuple")
    kind, keys, pos, has_gauss, cached = state
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached": float(cached)},
        "python": random.getstate(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` captured (CUDA states only when CUDA is here and was there)."""
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    n = state["numpy"]
    keys = n["keys"].numpy().astype(np.uint32)
    np.random.set_state((n["kind"], keys, n["pos"], n["has_gauss"], n["cached"]))
    random.setstate(_as_tuple(state["python"]))


def _as_tuple(value: Any) -> Any:
    """random.setstate wants nested tuples; a round trip through some loaders gives lists."""
    if isinstance(value, list | tuple):
        return tuple(_as_tuple(v) for v in value)
    return value


def save_atomic(payload: dict[str, Any], directory: Path, name: str = LATEST) -> Path:
    """Write ``payload`` to ``directory/name`` atomically (temp file, fsync, os.replace, fsync dir)."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / name
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(payload, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(directory)
    return target


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable (a crash right after os.replace could otherwise lose it)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_latest(directory: Path) -> dict[str, Any] | None:
    """The latest checkpoint in ``directory`` loaded onto the CPU, or None when there is none."""
    path = directory / LATEST
    if not path.exists():
        return None
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise RuntimeError(
            f"cannot load checkpoint {path}: {exc}; "
            "hint: move it away to start from scratch, or check it was written by this cockpit version"
        ) from exc
    if payload.get("format") != FORMAT:
        raise RuntimeError(
            f"checkpoint {path} has format {payload.get('format')!r}, expected {FORMAT}; "
            "hint: it was written by another cockpit version; move it away to start from scratch"
        )
    return payload


def position_of(payload: dict[str, Any]) -> Position:
    """The training position a checkpoint was taken at."""
    return Position(step=payload["step"], epoch=payload["epoch"], batch_in_epoch=payload["batch_in_epoch"])


def sharded_dir(directory: Path, step: int) -> Path:
    """Where the fsdp shards of the checkpoint at ``step`` go: ``checkpoints/sharded-<step, 9 digits>``."""
    return directory / f"{SHARDED_PREFIX}{step:09d}"


def prune_sharded(directory: Path, keep: str | None) -> None:
    """Delete every ``sharded-*`` directory but ``keep`` (the one ``latest.pt`` names): old or half-written."""
    for path in directory.glob(f"{SHARDED_PREFIX}*"):
        if path.name != keep and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)


def check_kind(payload: dict[str, Any] | None, sharded: bool, path: Path) -> None:
    """Refuse to resume an fsdp checkpoint without fsdp, or a ddp/dp one with fsdp, saying which is which."""
    if payload is None or (payload.get("sharded") is not None) == sharded:
        return
    written, now = ("fsdp", "ddp or dp") if payload.get("sharded") is not None else ("ddp or dp", "fsdp")
    raise RuntimeError(
        f"checkpoint {path} was written under backend {written}, but this run uses {now}; "
        f"hint: resume with the backend that wrote it, or move {path.parent} away to start from scratch"
    )
