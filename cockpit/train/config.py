"""RuntimeConfig: what one training process needs to know, read from the environment contract.

Pure (stdlib only, no torch): every fact is an argument (the environment mapping, whether CUDA is
available), so the rules below are unit-tested without starting a process.

Where each field comes from, first match wins:

* an explicit override passed by the script (``Runtime.from_env(seed=3)``): code beats environment;
* the cockpit contract (``COCKPIT_*``, see ``cockpit.contract``), set by every cockpit launcher;
* torchrun's ``RANK``/``LOCAL_RANK``/``WORLD_SIZE``..., else Slurm's ``SLURM_PROCID``/``SLURM_LOCALID``/
  ``SLURM_NTASKS`` (a script started by a bare ``srun``), else a single process (rank 0 of 1);
* defaults that make a bare ``torchrun script.py`` work: ddp, nccl with CUDA else gloo, fp32, seed 0,
  no run directory (no metrics files, no checkpoints, no resume: an accidental leftover directory is
  never resumed silently), no requeue.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from cockpit import contract

BACKENDS = contract.BACKENDS
PG_BACKENDS = ("nccl", "gloo")
PRECISIONS = contract.PRECISIONS
LAUNCHERS = ("torchrun", "slurm", "single")


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names the variable, the value and a hint."""


@dataclass(frozen=True)
class RuntimeConfig:
    """The settings of one training process; frozen, built by :func:`config_from_env`."""

    rank: int
    """Global rank, 0 <= rank < world_size."""
    local_rank: int
    """Rank on this node; picks the GPU (cuda:local_rank)."""
    world_size: int
    """Number of processes in the job (1 for a single process)."""
    launcher: str
    """Who started the process: "torchrun" (RANK set), "slurm" (SLURM_PROCID set) or "single"."""
    backend: str = "ddp"
    """ "ddp" (DistributedDataParallel) or "fsdp" (FSDP2 fully_shard), one process per device; or "dp"
    (DataParallel, one process)."""
    pg_backend: str = "gloo"
    """Process-group backend: "nccl" (GPUs) or "gloo" (CPU)."""
    precision: str = "fp32"
    """ "fp32", "fp16" (autocast + GradScaler) or "bf16" (autocast); CPU or CUDA (see cockpit.contract)."""
    seed: int = 0
    """Seed for torch, numpy and random; identical on every rank."""
    run_dir: Path | None = None
    """Where metrics/ and checkpoints/ go; None: neither is written and nothing is resumed."""
    run_id: str | None = None
    job_name: str | None = None
    requeue: bool = False
    """On a stop signal, run ``scontrol requeue`` from rank 0 (only when slurm_job_id is known)."""
    slurm_job_id: str | None = None
    """The id ``scontrol requeue`` takes: "<array job>_<task>" inside an array, else SLURM_JOB_ID."""
    master_addr: str | None = None
    """Rendezvous host for the Slurm fallback (torchrun's workers use env:// instead)."""
    master_port: int | None = None
    log_every: int = 10
    """Rank 0 prints a progress line every this many steps (0: never)."""
    metrics_every: int = 1
    """Each rank appends a metrics line every this many steps (0: never)."""
    checkpoint_every: int = 0
    """Save a checkpoint every this many steps (0: only on a stop signal and when asked)."""

    @property
    def is_main(self) -> bool:
        """True on global rank 0, the rank that prints progress and writes checkpoints."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """True when a process group is started: always under ddp/fsdp (even for one process), never under dp."""
        return contract.uses_process_group(self.backend)


OVERRIDABLE = frozenset(
    {"backend", "pg_backend", "precision", "seed", "run_dir", "requeue",
     "log_every", "metrics_every", "checkpoint_every"}
)


def config_from_env(env: Mapping[str, str], *, cuda_available: bool, **overrides: Any) -> RuntimeConfig:
    """Build the config for this process from ``env`` (os.environ) and explicit ``overrides``.

    An override of None means "not overridden", so a script can pass its optional CLI flags straight on.
    Raises ConfigError naming the variable, its value and a hint when something is malformed.
    """
    overrides = {k: v for k, v in overrides.items() if v is not None}
    unknown = set(overrides) - OVERRIDABLE
    if unknown:
        raise ConfigError(
            f"Runtime.from_env(): unknown override(s) {sorted(unknown)}; "
            f"hint: the overridable settings are {sorted(OVERRIDABLE)}"
        )
    rank, local_rank, world_size, launcher = _ranks(env)
    default_pg = "nccl" if cuda_available else "gloo"
    run_dir = env.get(contract.RUN_DIR) or None
    cfg = RuntimeConfig(
        rank=rank,
        local_rank=local_rank,
        world_size=world_size,
        launcher=launcher,
        backend=_choice(env, contract.BACKEND, BACKENDS, "ddp"),
        pg_backend=_choice(env, contract.PG_BACKEND, PG_BACKENDS, default_pg),
        precision=_choice(env, contract.PRECISION, PRECISIONS, "fp32"),
        seed=_int(env, contract.SEED, 0),
        run_dir=Path(run_dir) if run_dir else None,
        run_id=env.get(contract.RUN_ID) or None,
        job_name=env.get(contract.JOB_NAME) or None,
        requeue=env.get(contract.REQUEUE, "0").strip() == "1",
        slurm_job_id=requeue_target(env),
        master_addr=_master_addr(env) if launcher == "slurm" else None,
        master_port=_master_port(env) if launcher == "slurm" else None,
    )
    if "run_dir" in overrides:
        overrides["run_dir"] = Path(str(overrides["run_dir"]))
    cfg = replace(cfg, **overrides)
    check(cfg, cuda_available=cuda_available)
    return cfg


def check(cfg: RuntimeConfig, *, cuda_available: bool) -> None:
    """Reject combinations that cannot run here, with a hint (also catches bad overrides)."""
    for name, allowed in (("backend", BACKENDS), ("pg_backend", PG_BACKENDS), ("precision", PRECISIONS)):
        if getattr(cfg, name) not in allowed:
            raise ConfigError(f"{name}={getattr(cfg, name)!r} is not one of {'|'.join(allowed)}")
    for f in fields(cfg):
        if f.name.endswith("_every") and getattr(cfg, f.name) < 0:
            raise ConfigError(f"{f.name}={getattr(cfg, f.name)} is negative; hint: 0 switches it off")
    if cfg.distributed and cfg.pg_backend == "nccl" and not cuda_available:
        raise ConfigError(
            f"{contract.PG_BACKEND}=nccl but this torch sees no CUDA device; "
            "hint: use gloo on CPU, or check CUDA_VISIBLE_DEVICES and the torch build (torch.version.cuda)"
        )
    if not cfg.distributed and cfg.world_size != 1:
        raise ConfigError(
            f"{contract.BACKEND}=dp runs as ONE process, but WORLD_SIZE={cfg.world_size}; "
            "hint: start dp with plain `python script.py`, or use ddp or fsdp under torchrun"
        )


def _ranks(env: Mapping[str, str]) -> tuple[int, int, int, str]:
    """(rank, local_rank, world_size, launcher) from torchrun's variables, else Slurm's, else 1 process."""
    if "RANK" in env:
        rank = _int(env, "RANK", 0)
        local_rank = _int(env, "LOCAL_RANK", 0)
        world = _int(env, "WORLD_SIZE", 1)
        launcher = "torchrun"
    elif "SLURM_PROCID" in env:
        rank = _int(env, "SLURM_PROCID", 0)
        local_rank = _int(env, "SLURM_LOCALID", 0)
        world = _int(env, "SLURM_NTASKS", 1)
        launcher = "slurm"
    else:
        return 0, 0, 1, "single"
    if not 0 <= rank < world:
        raise ConfigError(
            f"rank {rank} is outside world size {world} (launcher {launcher}); "
            "hint: RANK/SLURM_PROCID must be below WORLD_SIZE/SLURM_NTASKS"
        )
    return rank, local_rank, world, launcher


def requeue_target(env: Mapping[str, str]) -> str | None:
    """The job id ``scontrol requeue`` needs: "<array job id>_<task id>" in an array, else SLURM_JOB_ID."""
    array_job, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    if array_job and task:
        return f"{array_job}_{task}"
    return env.get("SLURM_JOB_ID") or None


def first_host(nodelist: str) -> str:
    """The first host of a Slurm node list: "gpu[03-05,9],cpu1" -> "gpu03"; "a,b" -> "a"."""
    match = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not match:
        raise ConfigError(f"cannot read the Slurm node list {nodelist!r}; hint: set MASTER_ADDR explicitly")
    prefix, ranges = match.group(1), match.group(2)
    if not ranges:
        return prefix
    first = ranges.split(",")[0].split("-")[0]
    return prefix + first


def _master_addr(env: Mapping[str, str]) -> str:
    if env.get("MASTER_ADDR"):
        return env["MASTER_ADDR"]
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise ConfigError(
            "started by Slurm (SLURM_PROCID is set) but neither MASTER_ADDR nor SLURM_JOB_NODELIST is set; "
            "hint: export MASTER_ADDR=<first node> in the sbatch script"
        )
    return first_host(nodelist)


def _master_port(env: Mapping[str, str]) -> int:
    """MASTER_PORT, else derived from the job id as the sbatch script does (cockpit/render/sbatch.py)."""
    if env.get("MASTER_PORT"):
        return _int(env, "MASTER_PORT", 0)
    job_id = env.get("SLURM_JOB_ID", "0")
    return 12000 + (int(job_id) % 20000 if job_id.isdigit() else 0)


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer; hint: unset it or give a number") from None


def _choice(env: Mapping[str, str], name: str, allowed: tuple[str, ...], default: str) -> str:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw not in allowed:
        raise ConfigError(f"{name}={raw!r} is not one of {'|'.join(allowed)}; hint: unset it for {default}")
    return raw
