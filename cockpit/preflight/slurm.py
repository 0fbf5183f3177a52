"""Preflight of a Slurm job, before sbatch: what would otherwise fail only after the job waited in the queue.
Pure checks over ``SlurmFacts``: the script and workdir on this (submit) host, which must be the path the
nodes share; the partition known to the cluster, with enough nodes, and GPUs (gres) of the kind and count
asked; interface advice for a multi-node job. The facts come from sinfo, run by the caller through an
injected runner (cockpit.launch.slurm.facts) and parsed by cockpit.slurm.sinfo; nothing here runs a command.
"""

from __future__ import annotations

from dataclasses import dataclass

from cockpit.preflight import ifadvice
from cockpit.preflight.checks import FAIL, OK, WARN, Check
from cockpit.preflight.local import LocalFacts, file_checks
from cockpit.slurm.sinfo import PartitionNode
from cockpit.spec.model import JobSpec


@dataclass(frozen=True)
class SlurmFacts:
    """``files``: the script and workdir on the submit host; ``nodes``: sinfo's answer, None when it could
    not be asked (``sinfo_error`` says why)."""

    files: LocalFacts
    nodes: tuple[PartitionNode, ...] | None
    sinfo_error: str | None = None


def slurm_checks(spec: JobSpec, facts: SlurmFacts) -> list[Check]:
    checks = [_shared(c) for c in file_checks(spec, facts.files)]
    if facts.nodes is None:
        return checks + [Check("partition", WARN, f"not checked: {facts.sinfo_error}", (),
                               "cockpit could not ask Slurm (sinfo); sbatch will say")]
    checks += partition(spec, list(facts.nodes))
    return checks + interfaces(spec)


def _shared(check: Check) -> Check:
    if check.level != FAIL:
        return check
    return Check(check.name, FAIL, check.detail + " on this submit host", check.where,
                 f"{check.hint}; the nodes see the same path only on a shared filesystem")


def partition(spec: JobSpec, nodes: list[PartitionNode]) -> list[Check]:
    """The partition exists, has the nodes, and (a GPU job) the gres asked on enough of them."""
    names = list(dict.fromkeys(n.partition for n in nodes))
    wanted = spec.slurm.partition or next((n.partition for n in nodes if n.default), None)
    if wanted is None:
        return [Check("partition", FAIL, "no partition given and the cluster has no default one", (),
                      f"set slurm: {{partition: ...}} (the cluster has {', '.join(names) or 'none'})")]
    mine = [n for n in nodes if n.partition == wanted]
    if not mine:
        return [Check("partition", FAIL, f"{wanted} is not a partition of this cluster (it has "
                      f"{', '.join(names) or 'none'})", (), "fix slurm: {partition: ...}; sinfo lists them")]
    out = [Check("partition", OK, f"{wanted}: {len(mine)} node(s)")]
    if len(mine) < spec.num_nodes:
        out.append(Check("nodes", FAIL, f"the job asks {spec.num_nodes} nodes, partition {wanted} has {len(mine)}",
                         (), "ask fewer nodes, or another partition"))
    if spec.uses_gpus:
        out.append(_gres(spec, wanted, mine))
    return out


def _gres(spec: JobSpec, wanted: str, mine: list[PartitionNode]) -> Check:
    kind = spec.slurm.gres_type or ""
    per_node = spec.gpus_per_node or 1  # None ("all"): at least one
    counts = {n.name: sum(c for t, c in n.gpus if not kind or t == kind) for n in mine}
    enough = [h for h, c in counts.items() if c >= per_node]
    asked = f"gpu:{kind + ':' if kind else ''}{per_node}"
    if len(enough) >= spec.num_nodes:
        return Check("GPUs", OK, f"{asked} on {len(enough)} node(s) of {wanted}")
    have = sorted({f"{t + ':' if t else ''}{c}" for n in mine for t, c in n.gpus}) or ["no GPU gres"]
    return Check("GPUs", FAIL, f"the job asks {asked} on {spec.num_nodes} node(s); partition {wanted} has "
                 f"{len(enough)} such node(s) (gres there: {', '.join(have)})", (),
                 "fix gpus: / slurm: {gres_type: ...}, or pick a partition with GPUs (sinfo -o '%P %G')")


def interfaces(spec: JobSpec) -> list[Check]:
    """A multi-node job whose socket interface names loopback, or gloo left to the hostname's address."""
    if spec.num_nodes < 2:
        return []
    env = dict(spec.env)
    for var in (ifadvice.NCCL, ifadvice.GLOO):
        value = env.get(var)
        sel = ifadvice.parse(var, value) if value is not None else None
        if sel is not None and not sel.exclude and "lo" in sel.names:
            return [Check("interface", FAIL, f"{var}={value} selects the loopback interface: the other nodes "
                          "cannot reach it there", (), "name the interface the nodes share, e.g. eth0 or ib0")]
    if spec.dist_backend == "gloo" and ifadvice.GLOO not in env:
        return [Check("interface advice", WARN, "GLOO_SOCKET_IFNAME is unset: gloo uses the address each "
                      "node's hostname resolves to", (), "cockpit doctor --cluster (or --job JOB with a nodelist) "
                      "shows the nodes' interfaces and what to set")]
    return []
