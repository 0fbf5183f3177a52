"""JobSpec: a job file (YAML) -> a frozen, typed, validated model.

The model keeps what the user asked for (``pg_backend: auto`` stays ``auto``) so that the TUI can write a job
file back unchanged; properties give the resolved values (``dist_backend``, ``nprocs``) that renderers use.
Every problem is collected, not just the first, and each carries ``file:line:col``, the field path and a hint;
``cockpit validate`` prints them and exits 2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from cockpit import contract
from cockpit.spec import jobfile, yamlpos
from cockpit.spec.argv import check_exec_limits
from cockpit.spec.fields import MAX_PROCS, MAX_SEED, Checker
from cockpit.spec.nodes import gpus, node_env, nodes, spare_names
from cockpit.spec.recover import RecoverSpec, recover_section
from cockpit.spec.runner import RUNNERS, TORCHRUN, check_runner
from cockpit.spec.sections import SlurmSpec, SweepSpec, slurm_section, sweep_section
from cockpit.spec.yamlpos import Positions, Problem, YamlMap

MAX_TOTAL_STEPS = 10**12

LAUNCHERS = ("local", "ssh", "slurm")
BACKENDS = contract.BACKENDS
PG_BACKENDS = ("auto", "nccl", "gloo")
PRECISIONS = contract.PRECISIONS
CPU_PROCS_DEFAULT = 2


@dataclass(frozen=True)
class JobSpec:
    """A validated job. Invariants hold by construction: see ``load_spec``."""

    name: str
    script: str | None  # exactly one of script / module is set
    module: str | None
    args: tuple[str, ...] = ()
    launcher: str = "local"
    hosts: tuple[str, ...] = ("localhost",)  # local: localhost; ssh: the hosts; slurm: () or a nodelist
    num_nodes: int = 1
    nodelist: str | None = None  # slurm only: a hostlist such as "node[01-04]"
    gpus_per_node: int | None = 0  # 0: CPU; None: all GPUs of the node (count known only on the node)
    gpu_ids: tuple[int, ...] | None = None  # nvidia-smi order; None: all, or the scheduler's choice
    procs_per_node: int | None = None  # None: one per GPU (2 on CPU)
    backend: str = "ddp"
    pg_backend: str = "auto"
    precision: str = "fp32"
    seed: int = 0
    env: tuple[tuple[str, str], ...] = ()
    node_env: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()  # ssh: per-host env over env:
    secret_env: tuple[str, ...] = ()  # env names to mask in what cockpit shows, beyond those that look secret
    master_port: int | None = None  # None: auto
    rdzv: str = "static"  # "static" (--master-addr/--master-port) or "c10d" (--rdzv-endpoint)
    runner: str = TORCHRUN  # what starts the ranks on a node (local, ssh): one of spec.runner.RUNNERS
    max_restarts: int = 0
    # seconds without progress on any rank before the run is called stalled; 0: off; None (not given): adapted
    # to the run's own pauses (cockpit.hang.progress)
    stall_after: int | None = None
    start_after: int | None = None  # the same for a start (no step or collective yet); None: 600
    on_stall: str = "report"  # "report" | "stop" (after the evidence is gathered)
    workdir: str | None = None  # where the ranks run; None: the job file's directory
    python: str | None = None  # interpreter on the nodes; None: this one (local) or python3
    slurm: SlurmSpec = field(default_factory=SlurmSpec)
    sweep: SweepSpec | None = None
    recover: RecoverSpec = field(default_factory=RecoverSpec)  # relaunch on failure or stall (cockpit.launch.recovery)
    total_steps: int | None = None  # a script that is not cockpit.train: its optimizer steps, for the forecast
    source: str = "<memory>"  # the job file it came from
    # Valid but likely not meant (positioned, like problems); not part of what the job is.
    warnings: tuple[Problem, ...] = field(default=(), compare=False)
    # Where each field was written in the job file, for problems found later (`cockpit validate`'s file checks).
    where: Positions = field(default_factory=Positions, compare=False, repr=False)

    @property
    def uses_gpus(self) -> bool:
        return self.gpus_per_node != 0

    @property
    def dist_backend(self) -> str:
        """The resolved process-group backend: nccl with GPUs, gloo without, unless set explicitly."""
        if self.pg_backend != "auto":
            return self.pg_backend
        return "nccl" if self.uses_gpus else "gloo"

    @property
    def nprocs(self) -> int | None:
        """Processes per node; None when it is 'one per GPU' and the GPU count is not known here."""
        if self.backend == "dp":
            return 1
        if self.procs_per_node is not None:
            return self.procs_per_node
        return CPU_PROCS_DEFAULT if self.gpus_per_node == 0 else self.gpus_per_node

    @property
    def world_size(self) -> int | None:
        return None if self.nprocs is None else self.nprocs * self.num_nodes

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    def env_for(self, host: str) -> dict[str, str]:
        """The env: of one node: the job's env, with that node's node_env: entries over it."""
        return {**dict(self.env), **dict(dict(self.node_env).get(host, ()))}

    def is_secret(self, name: str) -> bool:
        """An env name whose value cockpit shows as ``***``: listed in secret_env:, or looks like a secret."""
        return name in self.secret_env or looks_secret(name)

    def for_display(self) -> JobSpec:
        """This job with its secret env values masked (cockpit render, the TUI's preview): never run it."""
        def mask(pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
            return tuple((k, MASK if self.is_secret(k) else v) for k, v in pairs)
        return replace(self, env=mask(self.env), node_env=tuple((h, mask(e)) for h, e in self.node_env))


MASK = "***"
_SECRET_WORDS = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


def looks_secret(name: str) -> bool:
    """`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*` (any case): API keys, access tokens and the like."""
    return _SECRET_WORDS.search(name) is not None


class SpecError(Exception):
    """A job file that cannot be used; ``problems`` are all the problems found, each with its position."""

    def __init__(self, filename: str, problems: list[Problem]):
        self.filename = filename
        self.problems = problems
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        return [p.format(self.filename) for p in self.problems]


def load_spec(path: str | Path, arg_max: int | None = None) -> JobSpec:
    """Read and validate a job file. Raises SpecError (with every problem) or OSError (cannot open it)."""
    try:
        text = jobfile.read_text(path)
    except yamlpos.LoadError as exc:
        raise SpecError(str(path), exc.problems) from None
    return parse_spec(text, str(path), arg_max)


def parse_spec(text: str, filename: str = "<memory>", arg_max: int | None = None) -> JobSpec:
    """Validate job text; ``filename`` is used in messages and as ``JobSpec.source``. ``arg_max``: the
    kernel's limit on one exec's arguments and environment (cockpit.spec.argv; None: this machine's)."""
    if len(text) > jobfile.MAX_BYTES:
        raise SpecError(filename, [jobfile.too_large(len(text.encode("utf-8", "replace")))])
    try:
        data, positions = yamlpos.load(text)
    except yamlpos.LoadError as exc:
        raise SpecError(filename, exc.problems) from None
    if data is None:
        raise SpecError(filename, [Problem(1, 1, "", "the job file is empty",
                                           "start from jobs/demo.yaml")])
    check = Checker(positions)
    spec = _build(check, data, filename)
    if spec is not None:
        check_exec_limits(check, spec, arg_max)
    if check.problems or spec is None:  # no spec: its problem is in problems
        raise SpecError(filename, sorted(check.problems, key=lambda p: (p.line, p.col)))
    return replace(spec, warnings=tuple(sorted(check.warnings, key=lambda p: (p.line, p.col))), where=positions)


_TOP_KEYS = ("name", "script", "module", "args", "launcher", "nodes", "gpus", "procs_per_node", "backend",
             "pg_backend", "precision", "seed", "env", "node_env", "master_port", "rdzv", "max_restarts", "workdir",
             "python", "slurm", "sweep", "stall_after", "start_after", "on_stall", "secret_env", "runner",
             "total_steps", "recover")


def _build(check: Checker, data: object, filename: str) -> JobSpec | None:
    if not check.mapping(data, (), _TOP_KEYS):
        return None
    launcher = check.choice(data, ("launcher",), LAUNCHERS, "local")
    hosts, num_nodes, nodelist = nodes(check, data, launcher)
    gpus_per_node, gpu_ids = gpus(check, data, launcher)
    spec = JobSpec(
        name=check.name(data, ("name",)),
        script=check.string(data, ("script",)),
        module=check.python_module(data, ("module",)),
        args=check.str_list(data, ("args",), split_hint="give a list, one argument per item: [{items}]"),
        launcher=launcher, hosts=hosts, num_nodes=num_nodes, nodelist=nodelist,
        gpus_per_node=gpus_per_node, gpu_ids=gpu_ids,
        procs_per_node=check.int_or_auto(data, ("procs_per_node",), minimum=1, maximum=MAX_PROCS),
        backend=check.choice(data, ("backend",), BACKENDS, "ddp"),
        pg_backend=check.choice(data, ("pg_backend",), PG_BACKENDS, "auto"),
        precision=check.choice(data, ("precision",), PRECISIONS, "fp32"),
        seed=check.integer(data, ("seed",), 0, minimum=0, maximum=MAX_SEED),
        env=check.env(data, ("env",)),
        node_env=node_env(check, data, launcher, hosts, spare_names(data)),
        secret_env=check.env_names(data, ("secret_env",)),
        master_port=check.int_or_auto(data, ("master_port",), minimum=1024, maximum=65535),
        rdzv=check.choice(data, ("rdzv",), ("static", "c10d"), "static"),
        runner=check.choice(data, ("runner",), tuple(RUNNERS), TORCHRUN),
        max_restarts=check.integer(data, ("max_restarts",), 0, minimum=0, maximum=1000),
        stall_after=check.optional_integer(data, ("stall_after",), minimum=0, maximum=7 * 86400),
        start_after=check.optional_integer(data, ("start_after",), minimum=0, maximum=7 * 86400),
        on_stall=check.choice(data, ("on_stall",), ("report", "stop"), "report"),
        workdir=check.string(data, ("workdir",)),
        python=check.string(data, ("python",)),
        slurm=slurm_section(check, data.get("slurm")),
        sweep=sweep_section(check, data.get("sweep")),
        recover=recover_section(check, data.get("recover"), launcher, hosts),
        total_steps=total_steps(check, data),
        source=filename,
    )
    _check_rules(check, spec)
    check_runner(check, spec)
    return spec


def _check_recover(check: Checker, spec: JobSpec) -> None:
    """recover: against the rest of the job: a sweep's trials are runs of their own; a trigger the job turns off."""
    if not spec.recover.enabled:
        return
    if spec.sweep is not None:
        check.problem(("recover", "attempts"), "a sweep's trials cannot relaunch themselves yet",
                      "drop recover:, and rerun the failed trials with cockpit sweep rerun RUN --failed")
    if "stall" in spec.recover.on and spec.stall_after == 0:
        check.warn(("recover", "on"), "stall_after: 0 turns the stall watch off, so a stall never relaunches",
                   "drop stall_after: (adapted to the run), or give the seconds, e.g. stall_after: 300")
    if spec.max_restarts:
        check.warn(("max_restarts",), "torchrun restarts the ranks itself before cockpit's recover: sees a "
                   "failure, without the diagnosis or the attempt accounting", "max_restarts: 0 with recover:")


def total_steps(check: Checker, data: YamlMap) -> int | None:
    """``total_steps:``: the steps a script that is not cockpit.train will run, for the forecast."""
    if data.get("total_steps") is None:
        return None
    value = check.int_or_auto(data, ("total_steps",), minimum=1, maximum=MAX_TOTAL_STEPS)
    if value is None and data.get("total_steps") == "auto":
        check.problem(("total_steps",), "auto is not a step count",
                      "drop total_steps: (cockpit.train reports its own), or give the optimizer steps, e.g. 10000")
    return value


def _check_rules(check: Checker, spec: JobSpec) -> None:
    """Rules across fields (the seeds' and today's)."""
    if spec.launcher == "slurm" and spec.name in ("bash", "interactive"):
        check.warn(("name",), f"Lightning takes a Slurm job named {spec.name!r} for an interactive session: it "
                   "ignores srun's tasks and starts its own processes in each", "give the job another name:")
    if spec.launcher == "local" and spec.rdzv == "c10d":
        check.warn(("rdzv",), "a local run always uses the static rendezvous, whose store cockpit holds to 127.0.0.1 "
                   "(c10d would start a second store for the ranks on every interface)", "drop rdzv:")
    if spec.max_restarts and spec.runner == TORCHRUN and (spec.launcher == "local" or spec.rdzv == "static"):
        # torch 2.13's static rendezvous keeps one store, without a prefix per round (c10d's has one): measured
        # with a plain torchrun, rank 1 failing once, gloo: 1 restart in 3 failed in init_process_group
        check.warn(("max_restarts",), "with the static rendezvous torchrun keeps its first round's keys in the "
                   "store: a restarted round's ranks may connect to the old round's addresses and fail to form "
                   "their process group", "recover: attempts: N (starts torchrun afresh)" if spec.launcher == "local"
                   else "rdzv: c10d (a store per round), or recover: attempts: N")
    said = any(p.path in ("script", "module") for p in check.problems)  # a bad value is already a problem
    if (spec.script is None) == (spec.module is None) and not said:
        check.problem(("script",), "give exactly one of script: or module:",
                      "script: train.py  (or module: mypkg.train)")
    one_process = not contract.uses_process_group(spec.backend)  # dp; every precision is fine (contract.py)
    if one_process and spec.num_nodes > 1:
        check.problem(("backend",), "dp (DataParallel) runs in one process on one node",
                      "use backend: ddp for several nodes")
    if one_process and spec.procs_per_node not in (None, 1):
        check.problem(("procs_per_node",), "dp runs exactly one process per node",
                      "drop procs_per_node, or use backend: ddp")
    if spec.pg_backend == "nccl" and not spec.uses_gpus:
        check.problem(("pg_backend",), "nccl needs GPUs and this job uses none",
                      "use pg_backend: gloo (or auto), or pick gpus:")
    if spec.gpus_per_node and spec.procs_per_node and spec.procs_per_node > spec.gpus_per_node:
        check.problem(("procs_per_node",),
                      f"{spec.procs_per_node} processes per node but only {spec.gpus_per_node} GPUs",
                      f"procs_per_node: {spec.gpus_per_node} (one per GPU), or pick more gpus:")
    _check_recover(check, spec)
    per_trial = spec.sweep.gpus_per_trial if spec.sweep else None
    if per_trial is not None:
        where = ("sweep", "gpus_per_trial")
        if spec.launcher != "local":
            check.problem(where, "splits one machine's GPUs between trials: local sweeps only",
                          "drop it (each Slurm array task gets the job's gpus:)")
        elif not spec.uses_gpus:
            check.problem(where, "the job uses no GPUs", "pick gpus:, or drop gpus_per_trial")
        elif spec.gpu_ids is not None and per_trial > len(spec.gpu_ids):
            check.problem(where, f"{per_trial} GPUs per trial but the job has {len(spec.gpu_ids)}",
                          f"gpus_per_trial: {len(spec.gpu_ids)} or fewer")
        elif spec.procs_per_node and spec.procs_per_node > per_trial:
            check.problem(("procs_per_node",), f"{spec.procs_per_node} processes per trial but only {per_trial} "
                          "GPUs per trial", f"procs_per_node: {per_trial}, or drop it (one per GPU)")
    if spec.sweep is not None:
        own = {a.split("=", 1)[0] for a in spec.args if a.startswith("-")}
        searched = [("grid", flag) for flag, _ in spec.sweep.grid] + [("params", p.flag) for p in spec.sweep.params]
        for part, flag in searched:
            if flag in own:
                check.problem(("sweep", part, flag.lstrip("-")), f"{flag} is also in args:, so each trial "
                              "would pass it twice", f"remove {flag} from args:")
