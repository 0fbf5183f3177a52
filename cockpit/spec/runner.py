"""`runner:` — what starts the ranks on each node.

One table says what each runner is, so adding one is a row here, its refusals in ``check_runner`` and its
renderer in cockpit.render. Under Slurm, srun starts one task per rank itself, so only ``spawn`` applies there
(one task per node, which spawns the ranks); under ``backend: dp`` there is one process and nothing to start.
"""

from __future__ import annotations

from typing import Protocol

from cockpit.spec.fields import Checker

TORCHRUN = "torchrun"
LEGACY = "torch.distributed.launch"
SPAWN = "spawn"
# runner -> what it is, for hints. The first is the default.
RUNNERS = {
    TORCHRUN: "python -m torch.distributed.run (torch >= 1.10)",
    LEGACY: "python -m torch.distributed.launch --use_env (torch < 1.10; deprecated since)",
    SPAWN: "python script.py once per node; the script starts procs_per_node ranks (torch.multiprocessing.spawn)",
}


class _Job(Protocol):
    """What the rules read of a JobSpec (typed structurally: model.py imports this module)."""

    @property
    def runner(self) -> str: ...
    @property
    def launcher(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def rdzv(self) -> str: ...
    @property
    def max_restarts(self) -> int: ...

    @property
    def nprocs(self) -> int | None: ...


def check_runner(check: Checker, spec: _Job) -> None:
    """Refuse runners where they would not be what runs, and settings the legacy launcher cannot take."""
    if spec.runner == TORCHRUN:
        return
    where = ("runner",)
    if spec.launcher == "slurm" and spec.runner != SPAWN:
        check.problem(where, f"under Slurm, srun starts one task per rank itself, so {spec.runner} has nothing "
                      "to start", "drop runner: (srun is the launcher under Slurm; runner: spawn also runs there), "
                      "or use launcher: local | ssh")
    elif spec.backend == "dp":
        check.problem(where, "backend dp runs one process, started directly", "drop runner:, or use backend: ddp")
    if spec.runner == SPAWN:
        _check_spawn(check, spec)
        return
    # The legacy launcher of old torch: underscore flags, a static rendezvous, no restarts, a number of procs.
    if spec.rdzv != "static":
        check.problem(("rdzv",), "torch.distributed.launch before torch 1.10 has no c10d rendezvous",
                      "rdzv: static (the default), or runner: torchrun")
    if spec.max_restarts:
        check.problem(("max_restarts",), "torch.distributed.launch before torch 1.10 cannot restart workers",
                      "max_restarts: 0, or runner: torchrun")
    if spec.backend == "ddp" and spec.nprocs is None:
        check.problem(("gpus",), "torch.distributed.launch needs a number of processes per node (it has no "
                      "--nproc_per_node=gpu)", "procs_per_node: N, or a GPU count or list: gpus: 4")


def _check_spawn(check: Checker, spec: _Job) -> None:
    """The script starts its ranks itself: no torchrun, so nothing of torchrun's applies, and cockpit must know
    how many ranks it spawns to name their logs (node rank x spawns + index)."""
    if spec.rdzv != "static":
        check.problem(("rdzv",), "runner: spawn starts no torchrun, so there is no c10d rendezvous",
                      "drop rdzv:; the script's own init_process_group meets at MASTER_ADDR:MASTER_PORT")
    if spec.max_restarts:
        check.problem(("max_restarts",), "runner: spawn starts no torchrun, so nothing restarts the ranks",
                      "max_restarts: 0, or runner: torchrun with a script that does not spawn")
    if spec.nprocs is None:
        check.problem(("procs_per_node",), "runner: spawn needs the number of ranks the script spawns per node",
                      "procs_per_node: N (what the script passes to mp.spawn as nprocs)")
