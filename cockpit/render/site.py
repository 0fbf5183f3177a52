"""The site: what a renderer needs that is not in the job spec. The caller looks them up (free port, run
directory, which interpreter); renderers never do IO, so the same spec and facts give the same text."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Site:
    run_dir: str  # absolute path of the run directory, as the nodes see it
    run_id: str
    workdir: str  # absolute directory the ranks start in
    python: str = "python3"  # interpreter on the nodes
    master_addr: str = "127.0.0.1"  # static rendezvous: rank 0's node as the others reach it
    master_port: int = 29500
    node_names: tuple[str, ...] = ("localhost",)  # one per node, in node-rank order (names log files)
    extra_args: tuple[str, ...] = ()  # appended to the script's args (`cockpit run job.yaml -- ARGS`)


def log_safe(name: str) -> str:
    """A host name made safe to use inside a file name."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "host"
