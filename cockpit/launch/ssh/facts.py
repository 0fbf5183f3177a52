"""Ask a job's nodes what the preflight and the ssh launcher need to know, concurrently, over one
persistent connection per node (cockpit.remote.RemotePool):

1. the probe on every node (cockpit.fleet.probes): GPUs, interfaces, versions;
2. the master address, picked from the interfaces (an address on a subnet every node shares), and the
   master port: bound on the master by the node agent's `listen` (``auto``: the kernel picks a free one);
3. while that listener holds the port, every node's `check`: resolve and connect to master:port, the
   workdir and script, the hostname's address, and whether it sees ``marker`` (a shared filesystem).

The answer is a ``cockpit.preflight.checks.JobFacts``; the checks over it are pure.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from cockpit.fleet.probes import Fleet
from cockpit.fleet.records import Interface
from cockpit.fs.paths import job_workdir
from cockpit.launch.site import interpreter
from cockpit.launch.ssh.shell import agent_command
from cockpit.preflight import ifadvice
from cockpit.preflight.checks import JobFacts, is_loopback, job_checks
from cockpit.remote import LocalRemote, RemoteError, RemotePool, SSHOptions
from cockpit.remote.base import is_ip
from cockpit.spec.model import JobSpec


class _JobFleet(Fleet):
    """The fleet probe, also asked whether the job's master port is free; python: is the job's (a path)."""

    python_is_path = True

    def __init__(self, hosts: list[str], pool: RemotePool, python: str, timeout: float, port: int | None):
        super().__init__(hosts, pool, python=python, timeout=timeout)
        self.port = port

    def probe_command(self, host: str, watch: float | None = None) -> list[str] | str:
        cmd = super().probe_command(host, watch)
        if self.port is None or host in self._fallback:
            return cmd
        extra = ["--port", str(self.port)]
        return [*cmd, *extra] if isinstance(cmd, list) else f"{cmd} {shlex.join(extra)}"


def node_python(pool: RemotePool, host: str, python: str) -> str:
    """The interpreter to run on ``host``: this one where the node is this machine, else the job's."""
    return sys.executable if isinstance(pool.get(host), LocalRemote) and python == "python3" else python


def pick_master_addr(spec: JobSpec, interfaces: ifadvice.Nodes) -> str:
    """How the other nodes should reach node 0: an address of it on a subnet all share, else its name."""
    master = spec.hosts[0]
    if spec.num_nodes < 2:
        return "127.0.0.1"
    if is_ip(master) and not is_loopback(master):
        return master
    if len(interfaces) == spec.num_nodes:
        found = ifadvice.node_address(master, interfaces, spec.env_for(master))
        if found:
            return found
    return master


def node_addresses(spec: JobSpec, interfaces: ifadvice.Nodes) -> dict[str, str]:
    """Each node's address on a subnet all share (for torchrun's --local-addr), where known."""
    if spec.num_nodes < 2 or len(interfaces) != spec.num_nodes:
        return {}
    found = {h: ifadvice.node_address(h, interfaces, spec.env_for(h)) for h in spec.hosts}
    return {h: a for h, a in found.items() if a}




async def _agent(pool: RemotePool, host: str, python: str, command: str, args: dict, timeout: float) -> dict:
    try:
        result = await pool.get(host).run(agent_command(node_python(pool, host, python), command, args), timeout)
    except RemoteError as exc:
        return {"agent_error": exc.message}
    if not result.ok:
        tail = (result.stderr.strip().splitlines() or [f"exit status {result.exit_status}"])[-1]
        return {"agent_error": f"{python}: {tail}"}
    try:
        return json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"agent_error": f"unreadable answer: {result.stdout.strip()[:200]!r}"}


async def _listen(pool: RemotePool, host: str, python: str, port: int, timeout: float):
    """Start the master's listener; returns (stream or None, its first answer)."""
    try:
        stream = await pool.get(host).stream(agent_command(node_python(pool, host, python), "listen",
                                                           {"port": port, "max_seconds": 4 * timeout}))
        line = await asyncio.wait_for(stream.__anext__(), timeout)
        return stream, json.loads(line)
    except (RemoteError, asyncio.TimeoutError, StopAsyncIteration, ValueError) as exc:
        return None, {"port": port, "free": None, "error": f"could not check the port: {exc}"}


async def gather(spec: JobSpec, pool: RemotePool, python: str, timeout: float = 20.0,
                 marker: tuple[str, str] | None = None, workdir: str | None = None) -> JobFacts:
    """Everything the preflight checks look at. ``marker``: (path, token) written in the local runs
    directory; ``workdir``: the ranks' working directory as the nodes should see it."""
    hosts = list(spec.hosts)
    fleet = _JobFleet(hosts, pool, python, timeout, spec.master_port)
    nodes = [n.node_report() for n in await fleet.refresh()]
    up = [n.host for n in nodes if n.reachable]
    facts = JobFacts(nodes=nodes)
    if not up:
        return facts
    ifaces = {n.host: n.interfaces for n in nodes if n.reachable and n.interfaces is not None}
    facts.master_addr = pick_master_addr(spec, ifaces)
    facts.addresses = node_addresses(spec, ifaces)
    answer: dict[str, Any]  # the listener's first answer: the node agent's JSON
    listener, answer = (None, {"port": spec.master_port, "free": None, "error": "the master is unreachable"})
    if hosts[0] in up:
        listener, answer = await _listen(pool, hosts[0], python, spec.master_port or 0, timeout)
    facts.master_port, facts.port_free, facts.port_error = answer.get("port"), answer["free"], answer["error"]
    args = {"workdir": workdir or "/", "script": spec.script, "marker": marker[0] if marker else "/nonexistent",
            "token": marker[1] if marker else "", "timeout": min(timeout, 5.0)}
    if facts.master_port and spec.num_nodes > 1:
        args.update(master=facts.master_addr, port=facts.master_port)
    try:
        answers = await asyncio.gather(*(_agent(pool, h, python, "check", args, timeout) for h in up))
    finally:
        if listener is not None:
            await listener.close()
    facts.node_checks = dict(zip(up, answers, strict=True))
    facts.nodes = [_agent_interfaces(n, facts.node_checks.get(n.host, {})) for n in nodes]
    return facts


def _agent_interfaces(node, answer: dict):
    """Where cockpit is not installed (the probe fell back to nvidia-smi), the interfaces the node agent saw."""
    found = answer.get("interfaces")
    if not node.reachable or node.interfaces is not None or found is None:
        return node
    return replace(node, interfaces=tuple(Interface.from_dict(i) for i in found),
                   interfaces_from="the node agent (ip -j addr or /sys/class/net)")


def ask_nodes(spec: JobSpec, job_path: str, runs_dir: Path, options: SSHOptions, timeout: float):
    """check_job with a marker file in ``runs_dir``: each node also says whether it sees it (shares it)."""
    marker = runs_dir / f".cockpit-shared-{secrets.token_hex(8)}"
    token = secrets.token_hex(16)
    marker.write_text(token + "\n", encoding="utf-8")
    marker.chmod(0o644)
    try:
        return check_job(spec, job_path, options, timeout, (str(marker.resolve()), token))
    finally:
        marker.unlink(missing_ok=True)


def check_job(spec: JobSpec, job_path: str, options: SSHOptions, timeout: float = 20.0,
              marker: tuple[str, str] | None = None, python: str | None = None):
    """The preflight: (checks, facts) for ``spec`` on its nodes (`cockpit doctor JOB` prints them)."""
    async def go():
        pool = RemotePool(options)
        try:
            return await gather(spec, pool, python or interpreter(spec), timeout, marker,
                                job_workdir(job_path, spec.workdir))
        finally:
            await pool.close()
    facts = asyncio.run(go())
    return job_checks(spec, facts), facts
