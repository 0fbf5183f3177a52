"""Stacks from the nodes of an ssh run: the node agent's `stacks` command on every node at once, over
the same SSH settings (and host-key checks) as the launch.

The gather has its own deadline, shorter than SSH's connect timeout: a node whose link is down (and SSH with
it) must not hold the finding back by the connect timeout (10 s by default). A node is given up on, and listed
as silent, when no SSH connection to it is up once every connected node has answered and as long again has
passed (at least GATHER_GRACE_S: the nodes were asked at once, so one not even connected by then is not
coming; a loaded machine that answers slowly waits longer), or at GATHER_CONNECT_MAX_S. A node that is
connected is slow, not dead: it is waited for (up to the old cap)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.hang.evidence import Evidence, new_request, workers_of
from cockpit.hang.stacks import last_dump, marker, parse_flight_record
from cockpit.remote.base import Remote
from cockpit.run.store import RunStatus

if TYPE_CHECKING:
    from cockpit.hang.transport import TransportGather
    from cockpit.launch.ssh.plan import NodePlan, SSHPlan

GATHER_GRACE_S = 1.0  # the least wait after the last connected node answered
GATHER_CONNECT_MAX_S = 10.0  # no SSH connection by then: silent, whatever the others do (SSH's default timeout)
GATHER_POLL_S = 0.1


def gather_over(elapsed: float, pending_reached: list[bool], last_answer: float | None) -> bool:
    """Whether the gather stops waiting: nothing pending; or every node still pending has no SSH connection
    (``pending_reached`` all False) and either the connected ones all answered, as long ago as that took
    (``last_answer``: seconds into the gather of the latest answer, None before any; at least GATHER_GRACE_S),
    or GATHER_CONNECT_MAX_S passed. ``elapsed``: seconds since the gather began."""
    if not pending_reached:
        return True
    if any(pending_reached):
        return False
    answered_long_ago = last_answer is not None and elapsed - last_answer >= max(GATHER_GRACE_S, last_answer)
    return answered_long_ago or elapsed >= GATHER_CONNECT_MAX_S


def collect(run_dir: Path, status: RunStatus, ranks: set[int] | None, timeout: float) -> dict[int, Evidence]:
    from cockpit.launch.ssh.plan import read_plan
    from cockpit.render.site import log_safe

    plan = read_plan(run_dir)
    request = new_request()
    args = {"request": request, "marker": marker(request, time.time()), "ranks": sorted(ranks or ()),
            "timeout": timeout, "transport": True}
    from cockpit.hang.rasread import ras_address

    ras = {n.node_rank: ras_address(node_script(run_dir, n.node_rank)) for n in plan.nodes}  # nccl jobs: NCCL's RAS
    every, waited = ask_every_node(plan, lambda n: ("stacks", {**args, "run_dir": n.run_dir, "host": log_safe(n.host),
                                                               "ras": ras[n.node_rank]}), timeout + 30)
    out = {}
    for answers in every:
        for a in rank_answers(answers):
            flight = parse_flight_record(a["fr"]) if a.get("fr") else None
            out[int(a["rank"])] = Evidence(int(a["rank"]), a["host"], last_dump(a.get("text") or ""), flight,
                                           a.get("beat"), workers_of(a.get("workers"), request))
    link = transport_of(run_dir, plan, every, waited)
    return {rank: replace(e, link=link) for rank, e in out.items()}


def rank_answers(lines: Sequence[dict]) -> list[dict]:
    """The per-rank answers in one node's lines: its {"host", "ranks": [...]} message (the agent's summary of
    the node), or lines of one rank each; the node's transport line is not one (transport_of reads it)."""
    out = []
    for line in lines:
        if isinstance(line.get("ranks"), list):
            out += [a for a in line["ranks"] if isinstance(a, dict) and "rank" in a]
        elif "rank" in line:
            out.append(line)
    return out


def ask_every_node(plan: SSHPlan, ask: Callable[[NodePlan], tuple[str, dict]],
                   timeout: float) -> tuple[list[list[dict]], float]:
    """The node agent's command ``ask(node)`` (its name and arguments) on every node of ``plan`` at once, each
    given ``timeout`` s to answer, until wait_answers says the gather is over: each node's JSON lines, in the
    plan's order ([] for a node that did not answer: unreachable, or given up on), and the seconds waited."""
    from cockpit.launch.ssh.facts import node_python
    from cockpit.launch.ssh.shell import agent_command
    from cockpit.remote import RemoteError, RemotePool

    async def one(pool: RemotePool, node: NodePlan) -> list[dict]:
        name, args = ask(node)
        command = agent_command(node_python(pool, node.host, plan.python), name, args)
        try:
            result = await asyncio.wait_for(pool.get(node.host).run(command, timeout), timeout + 5)
        except (RemoteError, asyncio.TimeoutError):
            return []  # an unreachable node answers nothing; its ranks show as silent
        return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]

    async def go() -> tuple[list[list[dict]], float]:
        pool = RemotePool(plan.ssh)
        tasks = [asyncio.ensure_future(one(pool, n)) for n in plan.nodes]
        try:
            waited = await wait_answers(tasks, [pool.get(n.host) for n in plan.nodes], timeout + 5)
            return [t.result() if t.done() and not t.cancelled() else [] for t in tasks], waited
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await pool.close()

    return asyncio.run(go())


def transport_of(run_dir: Path, plan: SSHPlan, every: Sequence[Sequence[dict]], waited: float) -> TransportGather:
    """The run's TransportGather from ask_every_node's answers (cockpit.hang.transportgather.gather_of)."""
    from cockpit.hang.transportgather import gather_of
    from cockpit.render.site import log_safe

    names = [(log_safe(n.host), n.address) for n in plan.nodes]
    scripts = {log_safe(n.host): node_script(run_dir, n.node_rank) for n in plan.nodes}
    return replace(gather_of(names, every, scripts), waited_s=round(waited, 1))


async def wait_answers(tasks: Sequence[asyncio.Future], remotes: Sequence[Remote], cap: float) -> float:
    """Wait for the nodes' answers until gather_over (or ``cap``); the seconds waited."""
    loop = asyncio.get_running_loop()
    start, last = loop.time(), None
    while True:
        pending = [(t, r) for t, r in zip(tasks, remotes, strict=True) if not t.done()]
        elapsed = loop.time() - start
        if gather_over(elapsed, [_reached(r) for _, r in pending], last) or elapsed >= cap:
            return elapsed
        done, _ = await asyncio.wait([t for t, _ in pending], timeout=GATHER_POLL_S)
        if any(not t.cancelled() and t.exception() is None and t.result() for t in done):
            last = loop.time() - start  # an answer (a node that failed, [], proves nothing about the others)


def _reached(remote: Remote) -> bool:
    """An SSH connection is up (a local node always is)."""
    from cockpit.remote.ssh import SSHRemote

    return not isinstance(remote, SSHRemote) or remote.connected()


def node_script(run_dir: Path, node_rank: int) -> str:
    """The node's script (it names the job's interface), "" when unreadable."""
    from cockpit.run import layout

    try:
        return (run_dir / layout.COMMANDS / f"node-{node_rank}.sh").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
