"""Many nodes at once: where their names come from, and what state each is in.

Nodes come from a job spec (``JobSpec.hosts``, or its Slurm nodelist), the cluster file (cockpit.fleet.cluster),
or Slurm's ``sinfo``. Each node runs the probe (cockpit.node.probe) over one persistent connection from cockpit.remote:
``refresh`` runs it once everywhere; ``start`` keeps one ``--watch`` stream per node, so a refresh is a
line on an open channel (``poke``), not a new SSH round trip. A node without cockpit installed is read with
plain nvidia-smi instead. Every node is handled by its own task with its own timeout: one slow or dead node
never delays the others or the caller, and a node that fails is retried with exponential backoff.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cockpit.fleet.cluster import NodesError, cluster_path
from cockpit.fleet.cluster import expand_hostlist as expand_hostlist  # re-exported: --nodes in cli and tui
from cockpit.fleet.cluster import scontrol_hostnames as scontrol_hostnames  # re-exported
from cockpit.fleet.records import REACHABLE, NodeReport, NodeState, is_node_state
from cockpit.node import probe
from cockpit.remote import CommandFailed, LocalRemote, RemoteError, RemotePool, Timeout, Unreachable

if TYPE_CHECKING:
    from cockpit.slurm.command import RunCommand
    from cockpit.slurm.sinfo import PartitionNode


@dataclass
class NodeStatus:
    """One node as last seen, updated in place by the fleet; readers take the frozen ``node_report()``.
    ``report`` is its last probe report, merged from the JSON lines (kept while it is down: last known)."""

    host: str
    state: NodeState = "connecting"
    reason: str | None = None
    hint: str | None = None
    report: dict | None = None
    updated: float | None = None  # time.time() of the last report
    since: float = field(default_factory=time.time)  # when the state last changed

    def node_report(self) -> NodeReport:
        """The typed record of this node as it stands (probe fields only while it is reachable)."""
        return NodeReport.from_probe(self.host, self.state, self.reason, self.hint, self.updated, self.report)

    def to_dict(self) -> dict:
        """The JSON shape of `cockpit gpus --json`."""
        return self.node_report().to_dict()


class Fleet:
    """The nodes' states, refreshed once (``refresh``) or continuously (``start`` / ``poke`` / ``stop``).
    ``python`` is a shell prefix (`cockpit gpus --python "env X=1 python3"`) unless ``python_is_path``: a
    job's python: is one path, quoted as the node script quotes it."""

    python_is_path = False

    def __init__(self, hosts: list[str], pool: RemotePool | None = None, python: str = "python3",
                 timeout: float = 20.0, backoff: tuple[float, float] = (1.0, 30.0), on_change=None):
        """``on_change(node)`` is called whenever a node's state changes (e.g. to post a TUI message)."""
        self.pool = pool or RemotePool()
        self.on_change = on_change
        self.python, self.timeout, self.backoff = python, timeout, backoff
        self.nodes = {h: NodeStatus(h) for h in dict.fromkeys(hosts)}
        self.interval: float | None = None
        self._tasks: list[asyncio.Task] = []
        self._streams: dict = {}
        self._fallback: set[str] = set()  # nodes without cockpit: read with nvidia-smi
        self._changed = asyncio.Event()

    def probe_command(self, host: str, watch: float | None = None) -> list[str] | str:
        extra = [] if watch is None else ["--watch", f"{watch:g}"]
        if host in self._fallback:
            return probe.fallback_script(watch)
        if isinstance(self.pool.get(host), LocalRemote):
            return [sys.executable, "-m", "cockpit.node.probe", *extra]
        python = shlex.quote(self.python) if self.python_is_path else self.python
        return f"{python} -m cockpit.node.probe {shlex.join(extra)}".strip()

    def statuses(self) -> list[NodeStatus]:
        """Every node in the given order; while watching, a node silent for too long reads ``timeout``."""
        if self.interval is not None:
            limit = 2 * self.interval + self.timeout
            for node in self.nodes.values():
                if node.state in REACHABLE and node.updated and time.time() - node.updated > limit:
                    self._set(node, "timeout", f"no report for {time.time() - node.updated:.0f} s",
                              "the node or the link may be down; keepalives will drop the connection")
        return list(self.nodes.values())

    async def refresh(self) -> list[NodeStatus]:
        """Probe every node once, concurrently; returns within about ``timeout`` whatever the nodes do."""
        await asyncio.gather(*(self._probe_once(h) for h in self.nodes))
        return self.statuses()

    async def _probe_once(self, host: str) -> None:
        node = self.nodes[host]
        try:
            result = await asyncio.wait_for(self.pool.get(host).run(self.probe_command(host), self.timeout),
                                            self.timeout + 1)
            if not result.ok and host not in self._fallback and _probe_missing(result.stderr, result.exit_status):
                self._fallback.add(host)
                result = await asyncio.wait_for(self.pool.get(host).run(self.probe_command(host), self.timeout),
                                                self.timeout + 1)
            if not result.ok and host not in self._fallback:
                raise CommandFailed(host, result)
            self._apply(node, result.stdout if host in self._fallback else result.stdout.strip().splitlines()[-1])
        except asyncio.TimeoutError:
            self._fail(node, Timeout(host, f"no answer within {self.timeout:g} s"))
        except (RemoteError, ValueError, IndexError) as exc:
            self._fail(node, exc)

    def start(self, interval: float) -> None:
        """Keep one probe stream per node, reporting every ``interval`` s; reconnect with backoff."""
        self.interval = interval
        self._tasks = [asyncio.create_task(self._follow(h, interval), name=f"fleet:{h}") for h in self.nodes]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        await self.pool.close()

    def poke(self) -> float:
        """Ask every streaming node for a report now (one line on each open channel); returns the time."""
        now = time.time()
        for stream in list(self._streams.values()):
            try:
                stream.write("\n")
            except (OSError, RuntimeError):
                continue  # that stream is closing; its task reconnects
        return now

    async def refresh_now(self, timeout: float | None = None) -> list[NodeStatus]:
        """poke, then wait until every node that is up or connecting has reported since (or ``timeout``)."""
        since = self.poke()
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while time.monotonic() < deadline:
            if not [n for n in self.nodes.values()
                    if (n.updated or 0) < since and n.state in (*REACHABLE, "connecting")]:
                break
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), deadline - time.monotonic())
            except asyncio.TimeoutError:
                break
        return self.statuses()

    async def _follow(self, host: str, interval: float) -> None:
        delay = self.backoff[0]
        while True:
            last = self.nodes[host].updated
            try:
                await self._stream_once(host, interval)
                raise Unreachable(host, "the probe stream ended", "cockpit reconnects by itself")
            except CommandFailed as exc:
                if host not in self._fallback and _probe_missing(exc.result.stderr, exc.result.exit_status):
                    self._fallback.add(host)
                    continue
                self._fail(self.nodes[host], exc)
            except asyncio.TimeoutError:
                self._fail(self.nodes[host], Timeout(host, f"no answer within {self.timeout:g} s"))
            except (RemoteError, ValueError) as exc:
                self._fail(self.nodes[host], exc)
            except Exception as exc:  # noqa: BLE001 - a bug must show on its node, not silently stop its updates
                self._fail(self.nodes[host], RemoteError(host, f"{type(exc).__name__}: {exc}", "a cockpit bug?"))
            if self.nodes[host].updated != last:  # it had been reporting: start the backoff over
                delay = self.backoff[0]
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.backoff[1])

    async def _stream_once(self, host: str, interval: float) -> None:
        remote = self.pool.get(host)
        stream = await asyncio.wait_for(remote.stream(self.probe_command(host, interval)), self.timeout + 1)
        self._streams[host] = stream
        block: list[str] = []
        try:
            async for line in stream:
                if host not in self._fallback:
                    self._apply(self.nodes[host], line)
                elif line == "@@end":
                    self._apply(self.nodes[host], "\n".join(block))
                    block = []
                else:
                    block.append(line)
        finally:
            self._streams.pop(host, None)
            await stream.close()

    def _apply(self, node: NodeStatus, text: str) -> None:
        report = probe.parse_fallback(text) if node.host in self._fallback else json.loads(text)
        if node.report and not all(k in report for k in probe.Probe.SLOW):  # a --watch line: unchanged left out
            report = {**node.report, **report}
        node.report, node.updated = report, time.time()
        hint = "cockpit is not installed there: read with nvidia-smi" if node.host in self._fallback else None
        self._set(node, report.get("state") or "error", report.get("reason"), hint)
        self._changed.set()

    def _fail(self, node: NodeStatus, exc: Exception) -> None:
        if isinstance(exc, RemoteError):
            self._set(node, exc.state if is_node_state(exc.state) else "error", exc.message, exc.hint)  # each is
        else:
            self._set(node, "error", f"unreadable probe output: {exc}", "is the node's cockpit the same version?")
        self._changed.set()

    def _set(self, node: NodeStatus, state: NodeState, reason: str | None, hint: str | None) -> None:
        changed = state != node.state
        if changed:
            node.since = time.time()
        node.state, node.reason, node.hint = state, reason, hint
        if changed and self.on_change is not None:
            self.on_change(node)


def _probe_missing(stderr: str, status: int | None) -> bool:
    """The node has no python3 (127) or no cockpit package: read it with nvidia-smi instead."""
    return status == 127 or "No module named cockpit" in stderr or "No module named 'cockpit" in stderr


def slurm_nodes(partition: str | None = None, runner: RunCommand | None = None) -> list[PartitionNode]:
    """Slurm's nodes (of ``partition``), one entry per (node, partition) (cockpit.slurm.sinfo.node_names: each
    node once); [] where Slurm is not installed. Raises NodesError if sinfo fails.
    ``runner``: the Slurm runner (cockpit.slurm.command); None: the real one, if sinfo is on PATH."""
    from cockpit.slurm.command import SlurmError, run_command
    from cockpit.slurm.sinfo import SINFO_ARGS, parse_sinfo

    if runner is None:
        if not shutil.which("sinfo"):
            return []
        runner = run_command
    argv = [*SINFO_ARGS, *([f"--partition={partition}"] if partition else [])]
    hint = f"(hint: list the nodes in {cluster_path()}, e.g. hosts: [gpu[01-04]], or pass --nodes)"
    try:
        r = runner(argv)
    except (OSError, subprocess.TimeoutExpired, SlurmError) as exc:
        raise NodesError(f"cannot ask Slurm for its nodes: sinfo: {exc} {hint}") from None
    if r.returncode != 0:
        # sinfo explains itself over several lines ending in `sinfo: fatal: ...`; the last one says it.
        last = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        raise NodesError(f"cannot ask Slurm for its nodes (Slurm is not configured here?): {last} {hint}")
    return parse_sinfo(r.stdout)
