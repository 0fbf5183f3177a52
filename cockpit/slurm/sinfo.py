"""Slurm's nodes per partition, as ``sinfo`` lists them: the one parser of its answer, pure (the caller runs
sinfo through its own runner). One entry per (node, partition): a node in two partitions is listed twice, so
every partition is seen, and ``node_names`` gives each node once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SINFO_ARGS = ("sinfo", "--noheader", "--Node", "--format=%N|%G|%t|%P")
_GPU = re.compile(r"(?:^|,)gpu(?::([^:,(]+))?:(\d+)")


@dataclass(frozen=True)
class PartitionNode:
    """One node in one partition, as sinfo lists it. ``gpus``: gres type -> count ("" for an untyped gpu:N);
    ``gres``: sinfo's gres text as it came (e.g. "gpu:a100:4"), None for none."""

    name: str
    partition: str
    state: str  # sinfo's short state: idle, mix, alloc, down*, drain, ...
    gpus: tuple[tuple[str, int], ...] = ()
    default: bool = False  # the cluster's default partition (sinfo marks it with *)
    gres: str | None = None


def parse_sinfo(text: str) -> list[PartitionNode]:
    """``sinfo --noheader --Node --format=%N|%G|%t|%P`` -> one entry per (node, partition), in sinfo's order;
    lines of another shape are skipped."""
    out = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 4:
            continue
        gres = None if parts[1] in ("(null)", "") else parts[1]
        gpus = tuple((m.group(1) or "", int(m.group(2))) for m in _GPU.finditer(gres or ""))
        out.append(PartitionNode(parts[0], parts[3].rstrip("*"), parts[2], gpus, parts[3].endswith("*"), gres))
    return out


def node_names(nodes: list[PartitionNode]) -> list[str]:
    """Each node once, in the order sinfo first lists it."""
    return list(dict.fromkeys(n.name for n in nodes))
