"""The environment every rank gets: the contract (cockpit.contract), GPU selection, the user's env."""

from __future__ import annotations

from collections.abc import Callable

from cockpit import contract
from cockpit.render.shell import export
from cockpit.render.site import Site, log_safe
from cockpit.spec.model import JobSpec


def contract_env(spec: JobSpec, facts: Site, host: str) -> list[tuple[str, str]]:
    """The contract variables, in the README's order."""
    return [
        (contract.RUN_DIR, facts.run_dir),
        (contract.RUN_ID, facts.run_id),
        (contract.JOB_NAME, spec.name),
        (contract.BACKEND, spec.backend),
        (contract.PG_BACKEND, spec.dist_backend),
        (contract.PRECISION, spec.precision),
        (contract.SEED, str(spec.seed)),
        (contract.REQUEUE, "1" if spec.launcher == "slurm" and spec.slurm.requeue else "0"),
        (contract.HOST, log_safe(host)),
    ]


def device_env(spec: JobSpec) -> list[tuple[str, str]]:
    """What every launcher sets about devices: nvidia-smi order for CUDA too, and, for a job without GPUs,
    ACCELERATE_USE_CPU=1: without it accelerate's Accelerator() on a machine with no GPU ignores torchrun's
    environment and every rank trains alone (what `accelerate launch --cpu` sets)."""
    return [("CUDA_DEVICE_ORDER", "PCI_BUS_ID")] + ([] if spec.uses_gpus else [("ACCELERATE_USE_CPU", "1")])


def gpu_env(spec: JobSpec) -> list[tuple[str, str]]:
    """device_env, and the picked GPU ids, except under Slurm, which sets them itself."""
    env = device_env(spec)
    if spec.launcher != "slurm" and spec.gpu_ids:
        env.append(("CUDA_VISIBLE_DEVICES", ",".join(str(i) for i in spec.gpu_ids)))
    return env


def node_env_lines(spec: JobSpec, facts: Site, host: str) -> list[str]:
    """All `export` lines for one node, user env last so it reads as the user wrote it (with the node's own
    node_env: values over the job's env:)."""
    pairs = gpu_env(spec) + [("PYTHONUNBUFFERED", "1")] + contract_env(spec, facts, host) + list(
        spec.env_for(host).items())
    return [export(name, value) for name, value in pairs]


def spawns(spec: JobSpec) -> int:
    """``runner: spawn``: the ranks the script spawns per node (the job check refuses such a job without it)."""
    if spec.nprocs is None:
        raise ValueError(f"job {spec.name}: runner: spawn without procs_per_node cannot be rendered")
    return spec.nprocs


def program_words(spec: JobSpec, facts: Site, quote: Callable[[str], str]) -> list[str]:
    """python -u script|-m module args..., each quoted."""
    target = ["-m", spec.module] if spec.module else [spec.script]
    words = [facts.python, "-u", *target, *spec.args, *facts.extra_args]
    return [quote(w) for w in words]
