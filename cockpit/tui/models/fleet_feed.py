"""Where the fleet screen's data comes from. A feed is an async ``run(publish)`` that calls ``publish(nodes)``
with every node as a cockpit.fleet.records.NodeReport ("cpus" filled in for this machine). No textual.

``LiveFleet`` keeps cockpit.fleet.probes's probe stream per node open (one persistent connection each; a refresh is a
line on it) and publishes a snapshot every interval and whenever a node changes state. ``FixedFleet`` replays
given snapshots: recorded fixtures for tests and snapshots, no processes, no clock."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from cockpit.fleet.probes import Fleet, NodeStatus
from cockpit.fleet.records import NodeReport
from cockpit.remote import LocalRemote, RemotePool

Publish = Callable[[list[NodeReport]], None]


class FleetFeed(Protocol):
    """What the app asks of a feed: LiveFleet or FixedFleet."""

    @property
    def local_names(self) -> tuple[str, ...]: ...

    async def run(self, publish: Publish) -> None: ...

    def poke(self) -> None: ...


class LiveFleet:
    def __init__(self, hosts: list[str], pool: RemotePool | None = None, interval: float = 2.0,
                 python: str = "python3", timeout: float = 20.0):
        self.hosts, self.interval = hosts, interval
        self.pool = pool or RemotePool()
        self.python, self.timeout = python, timeout
        self._fleet: Fleet | None = None

    @property
    def local_names(self) -> tuple[str, ...]:
        return tuple(h for h in self.hosts if isinstance(self.pool.get(h), LocalRemote))

    async def run(self, publish: Publish) -> None:
        changed = asyncio.Event()
        fl = self._fleet = Fleet(self.hosts, self.pool, python=self.python, timeout=self.timeout,
                                 on_change=lambda node: changed.set())
        fl.start(self.interval)
        try:
            while True:
                publish([self._node(n) for n in fl.statuses()])
                changed.clear()
                with contextlib.suppress(asyncio.TimeoutError):  # no change: publish on the interval
                    await asyncio.wait_for(changed.wait(), self.interval)
        finally:
            await fl.stop()

    def poke(self) -> None:
        """Ask every node for a report now."""
        if self._fleet is not None:
            self._fleet.poke()

    def _node(self, node: NodeStatus) -> NodeReport:
        report = node.node_report()
        if report.cpus is None and isinstance(self.pool.get(node.host), LocalRemote):
            report = replace(report, cpus=os.cpu_count())  # this machine: the probe does not report cores (yet)
        return report


class FixedFleet:
    """Publishes the given snapshots in order, then stays quiet (tests, snapshots, demos)."""

    def __init__(self, snapshots: list[list[NodeReport]], local_names: tuple[str, ...] = ("localhost",)):
        self.snapshots = snapshots
        self.local_names = local_names

    async def run(self, publish: Publish) -> None:
        for nodes in self.snapshots:
            publish(nodes)
            await asyncio.sleep(0)

    def poke(self) -> None:
        return None
