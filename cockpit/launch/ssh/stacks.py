"""Stacks from the nodes of an ssh run: the node agent's `stacks` command on every node at once, over
the same SSH settings (and host-key checks) as the launch."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from pathlib import Path

from cockpit.hang.evidence import Evidence, new_request, workers_of
from cockpit.hang.stacks import last_dump, marker, parse_flight_record
from cockpit.run.store import RunStatus


def collect(run_dir: Path, status: RunStatus, ranks: set[int] | None, timeout: float) -> dict[int, Evidence]:
    from cockpit.launch.ssh.facts import node_python
    from cockpit.launch.ssh.plan import read_plan
    from cockpit.launch.ssh.shell import agent_command
    from cockpit.remote import RemoteError, RemotePool
    from cockpit.render.site import log_safe

    plan = read_plan(run_dir)
    request = new_request()
    args = {"request": request, "marker": marker(request, time.time()), "ranks": sorted(ranks or ()),
            "timeout": timeout, "transport": True}

    async def one(pool: RemotePool, node) -> list[dict]:
        command = agent_command(node_python(pool, node.host, plan.python), "stacks",
                                {**args, "run_dir": node.run_dir, "host": log_safe(node.host)})
        try:
            result = await asyncio.wait_for(pool.get(node.host).run(command, timeout + 30), timeout + 35)
        except (RemoteError, asyncio.TimeoutError):
            return []  # an unreachable node answers nothing; its ranks show as silent
        return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]

    async def go():
        pool = RemotePool(plan.ssh)
        try:
            return await asyncio.gather(*(one(pool, n) for n in plan.nodes))
        finally:
            await pool.close()

    out = {}
    every = asyncio.run(go())
    for answers in every:
        for a in answers:
            if "rank" not in a:
                continue  # the node's transport line (below)
            flight = parse_flight_record(a["fr"]) if a.get("fr") else None
            out[int(a["rank"])] = Evidence(int(a["rank"]), a["host"], last_dump(a.get("text") or ""), flight,
                                           a.get("beat"), workers_of(a.get("workers"), request))
    from cockpit.hang.transportgather import gather_of

    names = [(log_safe(n.host), n.address) for n in plan.nodes]
    scripts = {log_safe(n.host): _script(run_dir, n.node_rank) for n in plan.nodes}
    link = gather_of(names, every, scripts)
    return {rank: replace(e, link=link) for rank, e in out.items()}


def _script(run_dir: Path, node_rank: int) -> str:
    """The node's script (it names the job's interface), "" when unreadable."""
    from cockpit.run import layout

    try:
        return (run_dir / layout.COMMANDS / f"node-{node_rank}.sh").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
