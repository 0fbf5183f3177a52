"""Pure renderers: job spec + facts -> the text cockpit would run. No IO here, ever.

``render(spec, facts, kind)`` is the dry run: ``cockpit render`` prints it and the launchers run it.
"""

from __future__ import annotations

from cockpit.render.sbatch import sbatch_script
from cockpit.render.shell import comment
from cockpit.render.site import Site
from cockpit.render.torchrun import dp_script, launch_script, spawn_script, torchrun_script
from cockpit.spec.model import JobSpec
from cockpit.spec.runner import LEGACY, SPAWN, TORCHRUN

KINDS = ("sbatch", "torchrun", "launch", "spawn", "dp")
# The node script each runner: gets (local and ssh launchers); a new runner adds its form here and to KINDS.
RUNNER_KIND = {TORCHRUN: "torchrun", LEGACY: "launch", SPAWN: "spawn"}
_PER_NODE = {"torchrun": torchrun_script, "launch": launch_script, "spawn": spawn_script}


class RenderError(ValueError):
    """The job cannot be rendered in the asked form; the message says why and what to do."""


def default_kind(spec: JobSpec) -> str:
    """What the job's launcher would run: sbatch under Slurm, else one node script per node, chosen by
    ``backend`` (dp: one process) and ``runner``."""
    if spec.launcher == "slurm":
        return "sbatch"
    return "dp" if spec.backend == "dp" else RUNNER_KIND[spec.runner]


def check_kind(spec: JobSpec, kind: str) -> None:
    """Refuse forms that would not be what cockpit runs for this job."""
    if kind not in KINDS:
        raise RenderError(f"unknown form {kind!r} (hint: one of {', '.join(KINDS)})")
    if kind == "sbatch" and spec.launcher != "slurm":
        raise RenderError(f"this job uses launcher {spec.launcher}, not slurm (hint: set launcher: slurm)")
    if kind != "sbatch" and spec.launcher == "slurm":
        raise RenderError("a slurm job runs through sbatch/srun (hint: --as sbatch, or launcher: local|ssh)")
    if kind == "dp" and spec.backend != "dp":
        raise RenderError("this job uses backend ddp (hint: --as torchrun|launch, or set backend: dp)")
    if kind in ("torchrun", "launch", "spawn") and spec.backend == "dp":
        raise RenderError("this job uses backend dp, one process (hint: --as dp, or set backend: ddp)")
    if (kind == "spawn") != (spec.runner == "spawn") and spec.launcher != "slurm":
        raise RenderError("the script spawns its own ranks (hint: --as spawn)" if kind != "spawn" else
                          "this job's script does not spawn its ranks (hint: set runner: spawn)")


def render(spec: JobSpec, facts: Site, kind: str, node_rank: int | None = None, *,
           for_display: bool = False) -> str:
    """The text for ``kind``; for per-node forms without ``node_rank``, every node's script in turn.
    ``for_display``: secret env values (JobSpec.is_secret) as ``***`` — to show, never to run."""
    check_kind(spec, kind)
    if for_display:
        spec = spec.for_display()
    if kind == "sbatch":
        return sbatch_script(spec, facts)
    if kind == "dp":
        return dp_script(spec, facts)
    one = _PER_NODE[kind]
    if node_rank is not None:
        if not 0 <= node_rank < spec.num_nodes:
            raise RenderError(f"--node-rank {node_rank} is out of range (hint: 0..{spec.num_nodes - 1})")
        return one(spec, facts, node_rank)
    if spec.num_nodes == 1:
        return one(spec, facts, 0)
    parts = [comment(f"===== node {n}: {facts.node_names[n]} =====") + "\n" + one(spec, facts, n)
             for n in range(spec.num_nodes)]
    return "\n".join(parts)


__all__ = ["Site", "KINDS", "RUNNER_KIND", "RenderError", "check_kind", "default_kind", "render"]
