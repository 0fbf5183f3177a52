"""`cockpit doctor` without a job: can these nodes run a job together at all? Pure checks over the fleet's
``NodeReport``s, in the same typed ``Check`` the job preflight (cockpit.preflight.checks) returns, so every face
prints and serialises both one way.

Nothing is known about a node that did not answer, so no check may say ok for it: with no node up, every
check but ``reachable`` is a warning reading "unknown (no node answered)".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from cockpit.fleet.records import NodeReport
from cockpit.preflight.checks import FAIL, OK, WARN, Check, Level
from cockpit.preflight.ifadvice import virtual_rank

_VERSIONS: tuple[tuple[str, Callable[[NodeReport], str | None]], ...] = (("driver version", lambda n: n.driver_version),
             ("CUDA (driver) version", lambda n: n.cuda_version),
             ("python version", lambda n: n.versions.python if n.versions else None),
             ("torch version", lambda n: n.versions.torch if n.versions else None),
             ("NCCL version", lambda n: n.versions.nccl if n.versions else None))


def fleet_checks(nodes: list[NodeReport]) -> list[Check]:
    """Reachable, drivers, the same GPU count and versions, a common interface, idle GPUs, a free port."""
    up = [n for n in nodes if n.reachable]
    down = [n for n in nodes if not n.reachable]
    checks = [_check("reachable", not down, f"{len(up)}/{len(nodes)} nodes",
                     "; ".join(f"{n.host}: {n.state} ({n.reason})" for n in down))]
    if not up:  # nothing is known about the nodes: no check may say ok
        names = ("GPU count", *(name for name, _ in _VERSIONS), "network interface", "GPUs idle", "master port free")
        return checks + [Check(name, WARN, "unknown (no node answered)") for name in names]
    drivers = {n.host: n.state for n in up}
    if any(s != "ok" for s in drivers.values()):
        bad = ", ".join(f"{h}: {s}" for h, s in drivers.items() if s != "ok")
        level: Level = FAIL if any(s == "ok" for s in drivers.values()) or "driver_error" in drivers.values() else WARN
        checks.append(Check("NVIDIA driver", level, f"{bad} (CPU-only nodes can run gloo)"))
    counts = {n.host: len(n.gpus) for n in up}
    checks.append(_check("GPU count", len(set(counts.values())) <= 1, f"{next(iter(counts.values()), 0)} per node",
                         _spread(counts), "every node must have the same number of GPUs"))
    checks += [_same(up, name, get) for name, get in _VERSIONS]
    checks.append(_interfaces(up))
    busy = [f"{n.host} GPU {g.index}: {len(g.processes)} process(es)" for n in up for g in n.gpus if g.processes]
    checks.append(Check("GPUs idle", WARN if busy else OK, "; ".join(busy) or "yes"))
    port_busy = [f"{n.host}: {p}" for n in up for p, free in (n.ports or ()) if not free]
    checks.append(Check("master port free", WARN if port_busy else OK,
                        "in use on " + ", ".join(port_busy) if port_busy else "yes"))
    order = sorted({w for n in up for w in n.warnings or ()})
    checks += [Check("GPU order", WARN, w) for w in order]
    return checks


def _check(name: str, ok: bool, good: str, bad: str, hint: str = "") -> Check:
    return Check(name, OK, good) if ok else Check(name, FAIL, bad + (f" ({hint})" if hint else ""))


def _spread(values: Mapping[str, object]) -> str:
    return ", ".join(f"{h}: {v}" for h, v in values.items())


def _same(up: list[NodeReport], name: str, get: Callable[[NodeReport], str | None]) -> Check:
    values = {n.host: v for n in up if (v := get(n)) is not None}
    if not values:
        return Check(name, WARN, "unknown (no node reported it)")
    if len(set(values.values())) == 1:
        return Check(name, OK, next(iter(values.values())))
    return Check(name, FAIL if name.startswith(("torch", "NCCL")) else WARN, "differs: " + _spread(values))


def _interfaces(up: list[NodeReport]) -> Check:
    """An interface name that is up with an IPv4 address on every node: what NCCL/GLOO_SOCKET_IFNAME can be.
    A NIC is proposed before a bridge or tunnel (docker0 sorts before eth0, but never carries a job)."""
    per_node = [{i.name for i in n.interfaces if i.name and i.up and i.ipv4 and not i.loopback}
                for n in up if n.interfaces]
    if not per_node:
        return Check("network interface", WARN, "unknown (no node reported its interfaces)")
    virtual = {i.name for n in up for i in n.interfaces or () if i.name and i.virtual}  # virtual on any node
    common = sorted(set.intersection(*per_node), key=lambda name: (virtual_rank(name, name in virtual), name))
    if common:
        return Check("network interface", OK, f"{', '.join(common)} on every node (NCCL_SOCKET_IFNAME={common[0]})")
    return Check("network interface", WARN,
                 "no interface name is up with IPv4 on every node: set NCCL_SOCKET_IFNAME per node")
