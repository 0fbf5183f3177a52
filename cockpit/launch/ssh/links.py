"""Transport evidence from the nodes of an ssh run while it trains: the node agent's `links` command on every
node at once (the ranks' TCP sockets, the nodes' interfaces), without signalling the ranks. The slow-link watch
(cockpit.hang.linkwatch) asks for it; the stall's gather (cockpit.launch.ssh.stacks) brings the same record
with the stacks.

One gather costs one SSH connection and one short Python process per node (the agent reads /proc and runs
`ss` once), and is given up on as the stacks' gather is (cockpit.launch.ssh.stacks.gather_over): a node whose
link is down is listed as silent, not waited for."""

from __future__ import annotations

from pathlib import Path

from cockpit.hang.transport import TransportGather
from cockpit.run.store import RunStatus

LINKS_TIMEOUT_S = 20.0  # the most one gather waits for a connected node that answers slowly


def collect(run_dir: Path, status: RunStatus, timeout: float = LINKS_TIMEOUT_S) -> TransportGather:
    """One gather of every node's transport record (cockpit.hang.transportgather.gather_of)."""
    from cockpit.launch.ssh.plan import read_plan
    from cockpit.launch.ssh.stacks import ask_every_node, transport_of
    from cockpit.render.site import log_safe

    plan = read_plan(run_dir)
    every, waited = ask_every_node(plan, lambda n: ("links", {"run_dir": n.run_dir, "host": log_safe(n.host)}),
                                   timeout)
    return transport_of(run_dir, plan, every, waited)
