"""The job file's two optional blocks, `slurm:` and `sweep:`: each its frozen value and the reader that checks
it through a Checker (positioned problems, usable defaults), as cockpit.spec.nodes does for where a job runs."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import Literal

from cockpit.spec.fields import MAX_GPUS, MAX_SEED, MAX_TRIALS, Checker
from cockpit.spec.yamlpos import YamlMap

SampleKind = Literal["choice", "range", "log_range"]
SAMPLE_KINDS: tuple[SampleKind, ...] = ("choice", "range", "log_range")


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
class Param:
    """One randomly searched argument: ``choice`` picks one of ``values``; ``range`` draws uniformly from
    [lo, hi]; ``log_range`` draws uniformly in log space (0 < lo < hi), the usual way to search a learning rate."""

    flag: str  # with dashes, as in the grid
    kind: SampleKind
    values: tuple[str, ...] = ()  # choice
    low: float = 0.0  # range, log_range
    high: float = 0.0

    def draw(self, rng: random.Random) -> str:
        """One value as the script gets it: a choice as written, a number with 6 significant digits."""
        if self.kind == "choice":
            return self.values[rng.randrange(len(self.values))]
        if self.kind == "range":
            return f"{rng.uniform(self.low, self.high):.6g}"
        return f"{math.exp(rng.uniform(math.log(self.low), math.log(self.high))):.6g}"


@dataclass(frozen=True)
class SweepSpec:
    """A grid of script arguments, every combination one trial (one run, or one array task); or a random
    search, ``samples`` draws of ``params`` from ``seed`` (with a grid too: every sample at every grid point).

    The trials are a pure function of the spec: the same seed gives the same trials on every machine and in
    every later look (`cockpit sweep show`, a rerun), so a trial's index names the same arguments for good."""

    grid: tuple[tuple[str, tuple[str, ...]], ...]  # (flag, values) in file order; flag includes dashes
    max_parallel: int | None = None
    gpus_per_trial: int | None = None  # local sweeps: each trial's share of the job's GPUs (None: all of them)
    samples: int | None = None  # random search: this many draws of params (None: a grid only)
    seed: int = 0  # random search: the draws' seed (Python's random.Random, stable across versions)
    params: tuple[Param, ...] = ()

    def count(self) -> int:
        """How many trials, without building them (validated to at most MAX_TRIALS)."""
        return math.prod(len(values) for _, values in self.grid) * (self.samples or 1)

    def trials(self) -> list[tuple[str, ...]]:
        """The extra arguments of each trial: grid order (last key varies fastest), each grid point followed
        by its samples in draw order."""
        flags = [flag for flag, _ in self.grid]
        combos = itertools.product(*(values for _, values in self.grid))
        points = [tuple(a for flag, v in zip(flags, combo, strict=True) for a in (flag, v)) for combo in combos]
        if not self.samples:
            return points
        rng = random.Random(self.seed)
        draws = [tuple(a for p in self.params for a in (p.flag, p.draw(rng))) for _ in range(self.samples)]
        return [point + draw for point in points for draw in draws]


_SLURM_KEYS = tuple(SlurmSpec.__dataclass_fields__)
_SWEEP_KEYS = ("grid", "max_parallel", "gpus_per_trial", "samples", "seed", "params")


def slurm_section(check: Checker, raw: object) -> SlurmSpec:
    if raw is None or not check.mapping(raw, ("slurm",), _SLURM_KEYS):
        return SlurmSpec()
    p = ("slurm",)
    return SlurmSpec(
        partition=check.sbatch_value(raw, (*p, "partition")),
        time=check.slurm_time(raw, (*p, "time")),
        account=check.sbatch_value(raw, (*p, "account")),
        qos=check.sbatch_value(raw, (*p, "qos")),
        mem=check.slurm_mem(raw, (*p, "mem")),
        cpus_per_task=check.int_or_auto(raw, (*p, "cpus_per_task"), minimum=1, maximum=100_000),
        gres_type=check.sbatch_value(raw, (*p, "gres_type")),
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
    searched = "samples" in raw or "params" in raw
    grid = check.grid(raw, ("sweep", "grid")) if "grid" in raw or not searched else ()
    samples = params = None
    if searched:
        samples = check.integer(raw, ("sweep", "samples"), 0, minimum=1, maximum=MAX_TRIALS) or None
        params = sample_params(check, raw)
        if raw.get("samples") is None:
            check.problem(("sweep", "params"), "params are drawn at random: say how many trials",
                          "samples: 8 (and seed: 0 to change the draws)")
    sweep = SweepSpec(grid=grid,
                      max_parallel=check.int_or_auto(raw, ("sweep", "max_parallel"), minimum=1, maximum=MAX_TRIALS),
                      gpus_per_trial=check.int_or_auto(raw, ("sweep", "gpus_per_trial"), minimum=1, maximum=MAX_GPUS),
                      samples=samples, seed=check.integer(raw, ("sweep", "seed"), 0, minimum=0, maximum=MAX_SEED),
                      params=params or ())
    if sweep.count() > MAX_TRIALS:
        sizes = " x ".join([str(len(values)) for _, values in grid] + ([f"{samples} samples"] if samples else []))
        check.problem(("sweep", "samples" if samples else "grid"),
                      f"{sizes} = {sweep.count()} trials, more than {MAX_TRIALS}",
                      "sweep fewer values, or split the sweep into several jobs")
        return SweepSpec(grid=(), max_parallel=sweep.max_parallel, gpus_per_trial=sweep.gpus_per_trial)
    return sweep


def sample_params(check: Checker, raw: YamlMap) -> tuple[Param, ...]:
    """``sweep.params``: ``arg: {choice: [...]}`` | ``{range: [lo, hi]}`` | ``{log_range: [lo, hi]}`` (a plain
    list is a choice). Each problem is reported where it is, with an example."""
    path = ("sweep", "params")
    value = raw.get("params")
    if not isinstance(value, dict) or not value:
        check.problem(path, "a random search needs params to draw", "params: {lr: {log_range: [1e-4, 1e-1]}}")
        return ()
    out = []
    for key, spec in value.items():
        where = (*path, key)
        flag = key if str(key).startswith("-") else f"--{key}"
        if not check.flag_name(flag, where):
            continue
        if isinstance(spec, list):
            spec = {"choice": spec}
        if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in SAMPLE_KINDS:
            check.problem(where, "expected one of choice: [...], range: [lo, hi], log_range: [lo, hi]",
                          f"{key}: {{range: [0.0, 0.5]}}")
            continue
        kind = next(iter(spec))
        if kind == "choice":
            values = check.str_list(spec, (*where, kind))
            if values:
                out.append(Param(flag, kind, values=values))
            else:
                check.problem((*where, kind), "needs at least one value", f"{key}: {{choice: [a, b]}}")
            continue
        bounds = spec[kind]
        if (not isinstance(bounds, list) or len(bounds) != 2
                or not all(isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b)
                           for b in bounds)):
            check.problem((*where, kind), f"expected two numbers [lo, hi], got {bounds!r}",
                          f"{key}: {{{kind}: [1e-4, 1e-1]}}")
        elif not bounds[0] < bounds[1]:
            check.problem((*where, kind), f"lo must be below hi, got {bounds[0]} and {bounds[1]}",
                          f"{key}: {{{kind}: [{bounds[1]}, {bounds[0]}]}}")
        elif kind == "log_range" and bounds[0] <= 0:
            check.problem((*where, kind), f"a log range starts above 0, got {bounds[0]}",
                          f"{key}: {{log_range: [1e-5, {bounds[1]}]}} (or range: for values from 0)")
        else:
            out.append(Param(flag, kind, low=float(bounds[0]), high=float(bounds[1])))
    return tuple(out)
