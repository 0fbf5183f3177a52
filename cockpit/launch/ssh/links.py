"""Transport evidence from the nodes of an ssh run while it trains: the node agent's `links` command on every
node at once (the ranks' TCP sockets, the nodes' interfaces), without signalling the ranks. The slow-link watch
(cockpit.hang.linkwatch) asks for it; the stall's gather (cockpit.launch.ssh.stacks) brings the same record
with the stacks.

One gather costs one SSH connection and one short Python process per node (the agent reads /proc and runs
`ss` once), and is given up on as the stacks' gather is (cockpit.launch.ssh.stacks.gather_over): a node whose
link is down is listed as silent, not waited for."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

from cockpit.hang.transport import TransportGather
from cockpit.run.store import RunStatus

LINKS_TIMEOUT_S = 20.0  # the most one gather waits for a connected node that answers slowly


def collect(run_dir: Path, status: RunStatus, timeout: float = LINKS_TIMEOUT_S) -> TransportGather:
    """One gather of every node's transport record (cockpit.hang.transportgather.gather_of)."""
    from cockpit.hang.transportgather import gather_of
    from cockpit.launch.ssh.facts import node_python
    from cockpit.launch.ssh.plan import read_plan
    from cockpit.launch.ssh.shell import agent_command
    from cockpit.launch.ssh.stacks import _script, _wait
    from cockpit.remote import RemoteError, RemotePool
    from cockpit.render.site import log_safe

    plan = read_plan(run_dir)

    async def one(pool: RemotePool, node) -> list[dict]:
        command = agent_command(node_python(pool, node.host, plan.python), "links",
                                {"run_dir": node.run_dir, "host": log_safe(node.host)})
        try:
            result = await asyncio.wait_for(pool.get(node.host).run(command, timeout), timeout + 5)
        except (RemoteError, asyncio.TimeoutError):
            return []  # unreachable: listed as silent
        return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]

    async def go() -> tuple[list[list[dict]], float]:
        pool = RemotePool(plan.ssh)
        tasks = [asyncio.ensure_future(one(pool, n)) for n in plan.nodes]
        try:
            waited = await _wait(tasks, [pool.get(n.host) for n in plan.nodes], timeout + 5)
            return [t.result() if t.done() and not t.cancelled() else [] for t in tasks], waited
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await pool.close()

    every, waited = asyncio.run(go())
    names = [(log_safe(n.host), n.address) for n in plan.nodes]
    scripts = {log_safe(n.host): _script(run_dir, n.node_rank) for n in plan.nodes}
    return replace(gather_of(names, every, scripts), waited_s=round(waited, 1))
