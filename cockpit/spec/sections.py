"""The job file's two optional blocks, `slurm:` and `sweep:`: each its frozen value and the reader that checks
it through a Checker (positioned problems, usable defaults), as cockpit.spec.nodes does for where a job runs."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from cockpit.spec.fields import MAX_GPUS, MAX_TRIALS, Checker


@dataclass(frozen=True)
class SlurmSpec:
    """The `slurm:` block. Empty values mean: leave it to the cluster's defaults."""

    partition: str | None = None
    time: str | None = None  # sbatch --time syntax: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
    account: str | None = None
    qos: str | None = None
    mem: str | None = None  # per node, e.g. "64G"
    cpus_per_task: int | None = None
    gres_type: str | None = None  # e.g. "a100" -> --gres=gpu:a100:N
    gpu_flag: str = "gres"  # "gres" (--gres=gpu:N) or "gpus-per-node" (--gpus-per-node=N)
    modules: tuple[str, ...] = ()  # `module load` lines, in order
    setup: tuple[str, ...] = ()  # shell lines run before srun, e.g. "conda activate env"
    requeue: bool = False  # --requeue + --signal=B:USR1@signal_seconds; the runtime checkpoints and requeues
    signal_seconds: int = 120
    extra: tuple[str, ...] = ()  # extra #SBATCH options, verbatim, e.g. "--exclusive"
    array_parallel: int | None = None  # sweeps: at most this many array tasks at once (--array=0-K%N)
    preflight: bool = True  # one short srun step checks every node of the allocation before training
    exclude_bad_nodes: bool = False  # a node the preflight finds bad: resubmit once with --exclude=<node>


@dataclass(frozen=True)
class SweepSpec:
    """A grid of script arguments; every combination is one trial (one run, or one array task)."""

    grid: tuple[tuple[str, tuple[str, ...]], ...]  # (flag, values) in file order; flag includes dashes
    max_parallel: int | None = None
    gpus_per_trial: int | None = None  # local sweeps: each trial's share of the job's GPUs (None: all of them)

    def count(self) -> int:
        """How many trials, without building them (a grid is validated to at most MAX_TRIALS)."""
        return math.prod(len(values) for _, values in self.grid)

    def trials(self) -> list[tuple[str, ...]]:
        """The extra arguments of each trial, in grid order (last key varies fastest)."""
        flags = [flag for flag, _ in self.grid]
        combos = itertools.product(*(values for _, values in self.grid))
        return [tuple(a for flag, v in zip(flags, combo, strict=True) for a in (flag, v)) for combo in combos]


_SLURM_KEYS = tuple(SlurmSpec.__dataclass_fields__)
_SWEEP_KEYS = ("grid", "max_parallel", "gpus_per_trial")


def slurm_section(check: Checker, raw: object) -> SlurmSpec:
    if raw is None or not check.mapping(raw, ("slurm",), _SLURM_KEYS):
        return SlurmSpec()
    p = ("slurm",)
    return SlurmSpec(
        partition=check.string(raw, (*p, "partition")),
        time=check.slurm_time(raw, (*p, "time")),
        account=check.string(raw, (*p, "account")),
        qos=check.string(raw, (*p, "qos")),
        mem=check.slurm_mem(raw, (*p, "mem")),
        cpus_per_task=check.int_or_auto(raw, (*p, "cpus_per_task"), minimum=1, maximum=100_000),
        gres_type=check.string(raw, (*p, "gres_type")),
        gpu_flag=check.choice(raw, (*p, "gpu_flag"), ("gres", "gpus-per-node"), "gres"),
        modules=check.modules(raw, (*p, "modules")),
        setup=check.str_list(raw, (*p, "setup")),
        requeue=check.boolean(raw, (*p, "requeue"), False),
        signal_seconds=check.integer(raw, (*p, "signal_seconds"), 120, minimum=1, maximum=65535),  # sbatch's
        extra=check.sbatch_options(raw, (*p, "extra")),
        array_parallel=check.int_or_auto(raw, (*p, "array_parallel"), minimum=1, maximum=MAX_TRIALS),
        preflight=check.boolean(raw, (*p, "preflight"), True),
        exclude_bad_nodes=check.boolean(raw, (*p, "exclude_bad_nodes"), False),
    )


def sweep_section(check: Checker, raw: object) -> SweepSpec | None:
    if raw is None or not check.mapping(raw, ("sweep",), _SWEEP_KEYS):
        return None
    grid = check.grid(raw, ("sweep", "grid"))
    sweep = SweepSpec(grid=grid,
                      max_parallel=check.int_or_auto(raw, ("sweep", "max_parallel"), minimum=1, maximum=MAX_TRIALS),
                      gpus_per_trial=check.int_or_auto(raw, ("sweep", "gpus_per_trial"), minimum=1, maximum=MAX_GPUS))
    if sweep.count() > MAX_TRIALS:
        sizes = " x ".join(str(len(values)) for _, values in grid)
        check.problem(("sweep", "grid"), f"{sizes} = {sweep.count()} trials, more than {MAX_TRIALS}",
                      "sweep fewer values, or split the sweep into several jobs")
        return SweepSpec(grid=(), max_parallel=sweep.max_parallel, gpus_per_trial=sweep.gpus_per_trial)
    return sweep
