"""Runtime: the object a training script talks to (think Lightning Fabric, far smaller).

::

    rt = Runtime.from_env()                              # process group, device, seeds, signal handlers
    model, optimizer = rt.setup(model, optimizer)        # to device, DDP/DP/FSDP wrap, resume from a checkpoint
    loader = rt.loader(dataset, batch_size=64)           # sharded per rank, resumable mid-epoch
    for epoch in rt.epochs(10):                          # starts at the resumed epoch
        for x, y in rt.batches(loader):                  # on rt.device; skips batches done before a resume
            with rt.autocast():
                loss = loss_fn(model(x), y)
            rt.backward(loss, optimizer)                 # backward + (scaled) optimizer step + zero_grad
            rt.step(loss, samples=len(x))                # metrics, progress, stop signals, checkpoints
    rt.finish()                                          # barrier, destroy the process group, os._exit(0)

Exit codes (``rt.finish`` ends the process with ``os._exit``: torch 2.x + gloo workers sometimes abort in
interpreter teardown after a good run, which made torchrun report a failure):

* 0: training finished, or a stop signal (SIGUSR1/SIGTERM) arrived and a checkpoint was saved (and the
  Slurm requeue, when asked for, succeeded): the work is safe, so neither torchrun nor Slurm should count a
  failure; the requeued job resumes from the checkpoint.
* 1: rank 0 could not requeue the job after saving (the message says why); rerunning resumes.
* 128 + signal number: stopped by a signal with nothing saved (no run directory, or no rt.setup), the
  shell's convention for "killed by that signal".
"""

from __future__ import annotations

import os
import random
import signal
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from cockpit.train import checkpoint as ckpt
from cockpit.train import dist, wrapping
from cockpit.train.config import RuntimeConfig, config_from_env
from cockpit.train.data import make_loader, shard_sampler, to_device
from cockpit.train.metrics import PREFIX, MetricsWriter, Throughput, metrics_path, progress_line
from cockpit.train.precision import Precision
from cockpit.train.stop import StopRequest, requeue


class Runtime:
    """One training process: its ranks, device, precision, data position, metrics and checkpoints."""

    def __init__(self, cfg: RuntimeConfig) -> None:
        """Start from an explicit config; most scripts call :meth:`from_env` instead."""
        self.cfg = cfg
        self.device = dist.pick_device(cfg)
        dist.start(cfg, self.device)
        seed_everything(cfg.seed)
        self.precision = Precision(cfg.precision, self.device, sharded=cfg.backend == "fsdp")
        self.position = ckpt.Position()
        self.total_steps: int | None = None  # the step the run ends at; set by epochs() + batches(), or by you
        self._epochs: int | None = None
        self.resumed_from: ckpt.Position | None = None
        self._model: nn.Module | None = None
        self._optimizer: torch.optim.Optimizer | None = None
        self._pending_rng: dict[str, Any] | None = None
        self._stop = StopRequest()
        self._stop.install()
        self._metrics = MetricsWriter(metrics_path(cfg.run_dir, cfg.rank), cfg.rank) if cfg.run_dir else None
        self._metrics_rate, self._progress_rate = Throughput(), Throughput()
        print(self._startup_line(), flush=True)

    @classmethod
    def from_env(cls, **overrides: Any) -> Runtime:
        """Read the cockpit/torchrun/Slurm environment (see cockpit.train.config); ``overrides`` win.

        Overridable: backend, pg_backend, precision, seed, run_dir, requeue, log_every, metrics_every,
        checkpoint_every; an override of None keeps the environment's value (or the default).
        """
        return cls(config_from_env(os.environ, cuda_available=torch.cuda.is_available(), **overrides))

    # -- who am I ---------------------------------------------------------------------------------------
    @property
    def rank(self) -> int:
        """Global rank."""
        return self.cfg.rank

    @property
    def world_size(self) -> int:
        """Number of processes."""
        return self.cfg.world_size

    @property
    def is_main(self) -> bool:
        """True on rank 0."""
        return self.cfg.is_main

    def print(self, *args: Any) -> None:
        """print() on rank 0 only, flushed."""
        if self.is_main:
            print(*args, flush=True)

    # -- model, optimizer, data -------------------------------------------------------------------------
    def wrap(self, model: nn.Module) -> nn.Module:
        """Move ``model`` to the device and wrap it: DistributedDataParallel (ddp), DataParallel (dp) or
        FSDP2's fully_shard (fsdp; an optimizer built before it no longer fits: use :meth:`setup`)."""
        return wrapping.wrap(model.to(self.device), self.cfg, self.device)

    def setup(
        self, model: nn.Module, optimizer: torch.optim.Optimizer
    ) -> tuple[nn.Module, torch.optim.Optimizer]:
        """Wrap ``model``, remember both for checkpoints, and resume from the latest checkpoint if any.

        Build ``optimizer`` over ``model.parameters()`` before calling this (moving a module keeps its
        Parameter objects; under fsdp its param groups are pointed at the sharded parameters). Every rank
        loads the checkpoint: the whole file onto the CPU, and under fsdp its own shards.
        """
        model = model.to(self.device)
        where = ckpt.checkpoint_dir(self.cfg.run_dir) if self.cfg.run_dir else None
        payload = ckpt.load_latest(where) if where else None
        wrapped = wrapping.setup(model, optimizer, self.cfg, self.device, payload, where)
        self._model, self._optimizer = model, optimizer
        if payload is not None and where is not None:  # where: the payload was read from it
            self._resume(payload, where)
        return wrapped, optimizer

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """The unwrapped model's whole state_dict, on every rank (under fsdp a collective: call it on ALL
        ranks; it gathers the shards)."""
        if self._model is None:
            raise RuntimeError("rt.full_state_dict() called before rt.setup(model, optimizer)")
        return wrapping.full_state_dict(self._model, self.cfg)

    def _resume(self, payload: dict[str, Any], where: Path) -> None:
        self.precision.load_state_dict(payload.get("scaler"))
        self.position = self.resumed_from = ckpt.position_of(payload)
        states = payload["rng"]
        same_world = payload["world_size"] == self.world_size
        self._pending_rng = states[self.rank] if same_world else states[0]
        p = self.position
        self.print(f"{PREFIX} resumed from {where / ckpt.LATEST} "
                   f"step={p.step} epoch={p.epoch} batch_in_epoch={p.batch_in_epoch}")
        if not same_world:
            self.print(f"{PREFIX} warning: checkpoint written by {payload['world_size']} ranks, now "
                       f"{self.world_size}: the data order differs from an uninterrupted run")

    def loader(self, dataset: Dataset, batch_size: int, *, shuffle: bool = True, drop_last: bool = False,
               **kwargs: Any) -> DataLoader:
        """A DataLoader over this rank's shard (DistributedSampler-style, seeded); kwargs go to DataLoader."""
        return make_loader(dataset, batch_size=batch_size, rank=self.rank, world_size=self.world_size,
                           seed=self.cfg.seed, shuffle=shuffle, drop_last=drop_last, **kwargs)

    def epochs(self, n: int) -> Iterator[int]:
        """Epoch numbers from the resumed epoch (0 on a fresh run) up to ``n - 1``."""
        self._epochs = n
        for epoch in range(self.position.epoch, n):
            if epoch != self.position.epoch:
                self.position = ckpt.Position(self.position.step, epoch, 0)
            yield epoch

    def batches(self, loader: DataLoader) -> Iterator[Any]:
        """The current epoch's batches of a training loader from :meth:`loader`, moved to ``rt.device``.

        Sets the sampler's epoch (the shuffle) and, after a resume, skips the batches the checkpoint
        already covered; the RNG states of the checkpoint are restored right before the first batch.
        """
        if self.total_steps is None and self._epochs is not None and (batches := _length(loader)) is not None:
            self.total_steps = self._epochs * batches  # the forecast's denominator
        skip = self.position.batch_in_epoch * loader.batch_size
        shard_sampler(loader).set_position(self.position.epoch, skip)
        if self._pending_rng is not None:
            ckpt.set_rng_state(self._pending_rng)
            self._pending_rng = None
        self._metrics_rate.restart()
        self._progress_rate.restart()
        for batch in loader:
            yield to_device(batch, self.device)

    # -- one step ---------------------------------------------------------------------------------------
    def autocast(self) -> AbstractContextManager[None]:
        """Context for the forward pass: autocast for fp16/bf16, nothing for fp32."""
        return self.precision.autocast()

    def backward(self, loss: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
        """``loss.backward()``, ``optimizer.step()`` (through the GradScaler for fp16), ``zero_grad()``."""
        self.precision.backward_and_step(loss, optimizer)

    def step(self, loss: torch.Tensor | float, samples: int) -> None:
        """Mark the end of one optimizer step on this rank (``samples``: this rank's batch size).

        Counts the step, writes metrics, prints progress on rank 0, saves periodic checkpoints, and asks
        all ranks whether any got a stop signal: if so it saves a checkpoint, requeues under Slurm when
        COCKPIT_REQUEUE=1, and ends the process (see the module docstring for exit codes): it does not
        return then.
        """
        p = self.position
        self.position = ckpt.Position(p.step + 1, p.epoch, p.batch_in_epoch + 1)
        step = self.position.step
        self._metrics_rate.add(samples)
        self._progress_rate.add(samples)
        if self._metrics is not None and _due(step, self.cfg.metrics_every):
            self._metrics.write(step=step, epoch=p.epoch, loss=_value(loss),
                                samples_per_s=self._metrics_rate.rate(), total_steps=self.total_steps)
        if self.is_main and _due(step, self.cfg.log_every):
            rate = self._progress_rate.rate() * self.world_size  # ranks see equal batch sizes
            print(progress_line(step=step, epoch=p.epoch, loss=_value(loss), samples_per_s=rate), flush=True)
        stop = dist.any_rank(self._stop.requested, self.device)
        if stop:
            self._stop_now()
        if _due(step, self.cfg.checkpoint_every):
            self.save_checkpoint()

    # -- checkpoints and the end ------------------------------------------------------------------------
    def save_checkpoint(self) -> Path | None:
        """Save model, optimizer, scaler, position and every rank's RNG state (call it on ALL ranks).

        Rank 0 writes ``<run_dir>/checkpoints/latest.pt`` atomically and gets its path; other ranks and
        runs without a run directory get None.
        """
        if self._model is None or self._optimizer is None:
            raise RuntimeError("rt.save_checkpoint() called before rt.setup(model, optimizer); "
                               "hint: call rt.setup first")
        rng = dist.gather_objects(ckpt.rng_state())  # collective: every rank gets here
        if self.cfg.run_dir is None:
            return None
        p, where = self.position, ckpt.checkpoint_dir(self.cfg.run_dir)
        payload: dict[str, Any] = {
            "format": ckpt.FORMAT, "step": p.step, "epoch": p.epoch, "batch_in_epoch": p.batch_in_epoch,
            "world_size": self.world_size, "scaler": self.precision.state_dict(), "rng": rng,
        }
        wrapping.add_state(payload, self._model, self._optimizer, self.cfg, where)  # fsdp: every rank writes
        if not self.is_main:
            return None
        path = ckpt.save_atomic(payload, where)
        ckpt.prune_sharded(where, keep=payload.get("sharded"))  # under fsdp: older shard directories
        return path

    def _stop_now(self) -> NoReturn:
        name = self._stop.signal_name or "a signal on another rank"
        if self.cfg.run_dir is None or self._model is None:
            why = "no COCKPIT_RUN_DIR" if self.cfg.run_dir is None else "rt.setup() was not called"
            self.print(f"{PREFIX} stop requested ({name}) at step {self.position.step}; "
                       f"{why}, so nothing was saved")
            self.finish(128 + int(self._stop_signum()))
        path = self.save_checkpoint()
        self.print(f"{PREFIX} stop requested ({name}): checkpoint saved at step {self.position.step}"
                   f" -> {path}")
        code = 0
        if self.is_main and self.cfg.requeue and self.cfg.slurm_job_id:
            ok, message = requeue(self.cfg.slurm_job_id)
            print(f"{PREFIX} {message}", flush=True, file=sys.stdout if ok else sys.stderr)
            code = 0 if ok else 1
        self.finish(code)

    def _stop_signum(self) -> int:
        name = self._stop.signal_name
        return int(signal.Signals[name]) if name else int(signal.SIGTERM)

    def finish(self, exit_code: int = 0) -> NoReturn:
        """End this process: barrier (exit code 0 only: after an error peers may be gone), destroy the
        process group, close metrics, flush stdout/stderr and ``os._exit(exit_code)``.

        ``os._exit`` skips interpreter teardown, where gloo workers of torch 2.x sometimes abort
        ("terminate called without an active exception") after a good run.
        """
        if exit_code == 0:
            dist.barrier(self.device)
        dist.stop()
        if self._metrics is not None:
            self._metrics.close()
        print(self._finish_line(exit_code), flush=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_code)

    # -- lines for the log ------------------------------------------------------------------------------
    def _startup_line(self) -> str:
        c = self.cfg
        return (f"{PREFIX} start rank={c.rank} world={c.world_size} local_rank={c.local_rank} "
                f"backend={c.backend} pg_backend={c.pg_backend if c.distributed else '-'} "
                f"precision={c.precision} device={self.device} seed={c.seed} launcher={c.launcher} "
                f"run_dir={c.run_dir or '-'} pid={os.getpid()}")

    def _finish_line(self, exit_code: int) -> str:
        line = f"{PREFIX} finish rank={self.rank} step={self.position.step} exit_code={exit_code}"
        if self.device.type == "cuda":
            line += f" peak_mem_mib={torch.cuda.max_memory_allocated(self.device) / 2**20:.1f}"
        return line


def seed_everything(seed: int) -> None:
    """Seed torch (CPU and CUDA), numpy and random with the same seed on every rank."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


def _due(step: int, every: int) -> bool:
    return every > 0 and step % every == 0


def _value(loss: torch.Tensor | float) -> float:
    return float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss)


def _length(loader: DataLoader) -> int | None:
    """Batches per epoch; None for an iterable-style dataset without a length (then there is no forecast)."""
    try:
        return len(loader)
    except TypeError:
        return None
