"""The preflight inside a Slurm allocation, as cockpit reads it back: pure functions over what the batch
script's check left in ``logs/preflight/<job id>/`` (cockpit.node.nodecheck wrote one answer per node,
cockpit.node.nodejudge the verdict). They turn the verdict into the run's note, and the nodes' interfaces
into NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME advice, as ``cockpit doctor`` gives for ssh runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cockpit.fleet.records import Interface
from cockpit.preflight import ifadvice


def bad_nodes(verdict: Mapping[str, Any]) -> list[str]:
    """The nodes the check named, in node-rank order (what ``--exclude`` would leave out)."""
    return list(verdict.get("bad") or {})


def note(verdict: Mapping[str, Any]) -> str:
    """'preflight in the allocation failed: node n2: 3 GPUs visible ...; ...' for status.json and the summary."""
    parts = [f"node {n}: {'; '.join(why)}" for n, why in (verdict.get("bad") or {}).items()]
    parts += list(verdict.get("failures") or [])
    took = verdict.get("seconds")
    head = "preflight in the allocation failed" + (f" after {took:.1f} s" if isinstance(took, (int, float)) else "")
    return f"{head}: " + "; ".join(parts or ["no reason recorded (see logs/agent.sbatch.log)"])


def hint(verdict: Mapping[str, Any], job_id: str) -> str:
    """What to do about it, naming the nodes."""
    bad = bad_nodes(verdict)
    if not bad:
        return "fix what differs between the nodes; slurm.preflight: false skips the check"
    nodes = ",".join(bad)
    return (f"slurm.exclude_bad_nodes: true resubmits once with --exclude={nodes}; or add --exclude={nodes} to "
            f"slurm.extra, and tell the admins (files: logs/preflight/{job_id}/)")


def interfaces(answers: Mapping[str, Mapping[str, Any] | None]) -> dict[str, list[Interface]]:
    """node -> its interfaces, for the nodes that listed them."""
    return {n: [Interface.from_dict(i) for i in a["interfaces"]] for n, a in answers.items()
            if a is not None and a.get("interfaces") is not None}


def advice(answers: Mapping[str, Mapping[str, Any] | None]) -> str | None:
    """'interfaces: subnet 10.0.0.0/24 is on every node, under the same name: set NCCL_SOCKET_IFNAME=eth0, ...'
    for a job of several nodes that all listed their interfaces; None otherwise (nothing to advise)."""
    nodes = interfaces(answers)
    if len(answers) < 2 or len(nodes) != len(answers):
        return None
    found = ifadvice.advise(nodes)
    if found.subnet is None:
        return f"interfaces: {found.reason}"
    setting = dict(next((a.get("env") or {} for a in answers.values() if a), {}))
    have = ", ".join(f"{k}={v}" for k, v in setting.items()) or "neither set"
    return f"interfaces: {found.reason}: set {found.env_text()} (the job runs with {have})"
