"""Preflight of a local job: what `cockpit run` checks before it starts ranks on this machine, and what
`cockpit doctor JOB` prints for it. Pure checks over ``LocalFacts`` (gathered by cockpit.launch.local.facts),
returning the same typed ``Check`` as the ssh preflight, whose GPU and version rules they reuse.

The file checks come first and need no probe, so a job whose script does not exist is refused at once,
not after its ranks have started (or after minutes in a queue).
"""

from __future__ import annotations

from dataclasses import dataclass

from cockpit.fleet.report import NodeReport
from cockpit.preflight.checks import FAIL, OK, Check, JobFacts, gpus, versions
from cockpit.spec.model import JobSpec

HOST = "localhost"


@dataclass(frozen=True)
class LocalFacts:
    """This machine as the job would see it. ``node``: the probe run by the job's python (GPUs, driver,
    torch/NCCL versions, ``port`` free or not); None when not asked (the file checks alone)."""

    workdir: str
    workdir_exists: bool
    script_exists: bool
    python: str
    node: NodeReport | None = None
    port: int | None = None  # the job's fixed master_port (auto: None, a free one is picked at start)


def file_checks(spec: JobSpec, facts: LocalFacts) -> list[Check]:
    """The working directory and the script exist where the ranks will start."""
    if not facts.workdir_exists:
        return [Check("workdir", FAIL, f"{facts.workdir} does not exist", (HOST,),
                      "create it, or fix workdir: in the job (relative to the job file's directory)")]
    if not facts.script_exists:
        return [Check("script", FAIL, f"{spec.script} is missing in {facts.workdir}", (HOST,),
                      "fix script: (relative to workdir:), or create the script")]
    return [Check("script", OK, f"{spec.script} in {facts.workdir}")]


def local_checks(spec: JobSpec, facts: LocalFacts) -> list[Check]:
    """Files, then (once the node was asked) the job's python, GPUs and driver, torch, the master port."""
    checks = file_checks(spec, facts)
    node = facts.node
    if node is None:
        return checks
    if not node.reachable:  # the probe could not run under the job's python: nothing else is known
        return checks + [Check("python", FAIL, f"{facts.python}: {node.reason}", (HOST,),
                               node.hint or "set python: in the job to an interpreter with torch")]
    jf = JobFacts(nodes=[node])
    checks += gpus(spec, jf) + versions(spec, jf)
    free = dict(node.ports or ()).get(str(facts.port)) if facts.port is not None else None
    if free is False:
        checks.append(Check("master port", FAIL, f"port {facts.port} is in use on this machine", (HOST,),
                            f"master_port: auto picks a free one, or stop what listens there "
                            f"(`ss -ltnp 'sport = :{facts.port}'`)"))
    elif free:
        checks.append(Check("master port", OK, f"{facts.port} is free"))
    return checks
