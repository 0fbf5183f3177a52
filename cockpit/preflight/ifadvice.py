"""Which network interface NCCL and gloo should use across the nodes of a job: pure functions over the
interfaces the probe reports (``cockpit.fleet.records.Interface``: name, up, loopback, ipv4 ["a.b.c.d/p"], speed).

The two libraries read their variables differently, so one value may work for NCCL and not for gloo:

- NCCL_SOCKET_IFNAME is a comma list of name *prefixes* ("eth" matches eth0 and eth1); a leading ``^``
  excludes instead of selects, a leading ``=`` (after the ``^`` if both) matches exact names. Interfaces
  listed but absent on a node are simply not matched, so "eno1,ens5" works when nodes name the NIC
  differently (NVIDIA/nccl#286). Unset: NCCL behaves as "^docker,lo" (IB first; simplified here).
- GLOO_SOCKET_IFNAME is a comma list of *exact* names, and every one must exist on the node; unset, gloo
  uses the address the hostname resolves to (often 127.0.0.1: the classic multi-node hang).

Ranks on different nodes can only talk over an IPv4 subnet that every node has an address in, so advice
starts from those common subnets; a value "works" when, on every node, what it selects is up and on that
subnet. When no single value can (gloo with differing names), the advice is one value per node.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:  # the probe's records are not needed to check a job's names here (`cockpit validate`)
    from cockpit.fleet.records import Interface

NCCL, GLOO = "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"
NCCL_DEFAULT = "^docker,lo"
Nodes: TypeAlias = "Mapping[str, Sequence[Interface]]"  # host -> its interfaces
# Names of software interfaces that never carry traffic between nodes (container and VM bridges, overlays,
# VPNs, loopback): the fallback where the node did not say (Interface.virtual None), and the tie-break among
# interfaces that are all virtual (inside a container, even eth0 is a veth).
_VIRTUAL = ("docker", "virbr", "br-", "veth", "cni", "flannel", "cali", "tun", "tap", "vxlan", "tailscale", "lo",
            "podman", "lxcbr", "lxdbr", "cilium")


@dataclass(frozen=True)
class Selector:
    """A parsed *_SOCKET_IFNAME value."""

    names: tuple[str, ...]
    exclude: bool = False  # "^": everything but these
    exact: bool = False  # "=": whole names, not prefixes

    def matches(self, ifname: str) -> bool:
        hit = any(ifname == n if self.exact else ifname.startswith(n) for n in self.names)
        return hit != self.exclude


def parse(var: str, value: str) -> Selector:
    """NCCL's prefix/^/= syntax for NCCL_SOCKET_IFNAME; exact names for GLOO_SOCKET_IFNAME."""
    text = value.strip()
    if var != NCCL:
        return Selector(tuple(n.strip() for n in text.split(",") if n.strip()), exact=True)
    exclude = text.startswith("^")
    text = text[1:] if exclude else text
    exact = text.startswith("=")
    text = text[1:] if exact else text
    return Selector(tuple(n.strip() for n in text.split(",") if n.strip()), exclude, exact)


def selected(var: str, value: str | None, interfaces: Sequence[Interface]) -> list[Interface]:
    """The interfaces of one node that the library would use for ``value`` (None: unset)."""
    if value is None:
        if var != NCCL:
            return []  # gloo goes by the hostname's address, not by an interface name
        value = NCCL_DEFAULT
    sel = parse(var, value)
    return [i for i in interfaces if i.name and sel.matches(i.name)]


def missing_gloo_names(value: str, interfaces: Sequence[Interface]) -> list[str]:
    """GLOO_SOCKET_IFNAME names absent on the node (gloo fails to start on any)."""
    have = {i.name for i in interfaces}
    return [n for n in parse(GLOO, value).names if n not in have]


def networks(iface: Interface) -> list[ipaddress.IPv4Interface]:
    out = []
    for text in iface.ipv4:
        try:
            out.append(ipaddress.IPv4Interface(text))
        except ValueError:
            continue
    return out


def usable(iface: Interface) -> bool:
    return iface.up and not iface.loopback and bool(networks(iface))


@dataclass(frozen=True)
class Attachment:
    """One node's interface on a subnet."""

    ifname: str
    address: str
    speed_mbps: int | None = None
    virtual: bool | None = None  # Interface.virtual: the node's own word on it


def common_subnets(nodes: Nodes) -> dict[str, dict[str, Attachment]]:
    """IPv4 subnets (non-loopback, up) that every node has an address in, each a different one (two nodes
    with the same address are on private networks of their own, e.g. docker0): subnet -> host ->
    attachment. Ordered best first: a NIC before a bridge or tunnel (``virtual_rank``), fastest slowest link,
    then by name."""
    per_host: dict[str, dict[str, Attachment]] = {}
    for host, ifaces in nodes.items():
        for iface in filter(usable, ifaces):
            if iface.name is None:  # never from a probe (ip and sysfs name every interface); nothing to select
                continue
            for net in networks(iface):
                key = str(net.network)
                per_host.setdefault(key, {}).setdefault(
                    host, Attachment(iface.name, str(net.ip), iface.speed_mbps, iface.virtual))
    # an address every node has the same of (docker0's 172.17.0.1) is each node's private network, not one
    common = {k: v for k, v in per_host.items()
              if len(v) == len(nodes) and nodes and len({a.address for a in v.values()}) == len(v)}

    def rank(item: tuple[str, dict[str, Attachment]]) -> tuple[tuple[bool, bool], int, list[str]]:
        _, hosts = item
        virtual = max(virtual_rank(a.ifname, a.virtual) for a in hosts.values())
        speed = min((a.speed_mbps or 0) for a in hosts.values())
        return (virtual, -speed, sorted(a.ifname for a in hosts.values()))
    return dict(sorted(common.items(), key=rank))


def works(var: str, value: str, nodes: Nodes, subnet: str) -> bool:
    """Whether ``value`` selects, on every node, only up interfaces with an address on ``subnet``."""
    net = ipaddress.IPv4Network(subnet)
    for ifaces in nodes.values():
        if var == GLOO and missing_gloo_names(value, ifaces):
            return False
        chosen = selected(var, value, ifaces)
        if not chosen or not all(usable(i) and any(n.ip in net for n in networks(i)) for i in chosen):
            return False
    return True


@dataclass(frozen=True)
class Advice:
    """What to set. ``values`` hold one value per variable for every node; ``per_node`` is used instead
    when no single value works. ``subnet`` is None when the nodes share none (then nothing can work)."""

    subnet: str | None
    values: dict[str, str] = field(default_factory=dict)
    per_node: dict[str, dict[str, str]] = field(default_factory=dict)
    attachments: dict[str, Attachment] = field(default_factory=dict)
    reason: str = ""

    def env_text(self) -> str:
        if self.values and not self.per_node:
            return ", ".join(f"{k}={v}" for k, v in self.values.items())
        parts = [f"{k}={v}" for k, v in self.values.items()]
        parts += [f"{h}: " + " ".join(f"{k}={v}" for k, v in env.items()) for h, env in self.per_node.items()]
        return "; ".join(parts)


def _nccl_candidates(names: list[str], nodes: Nodes, attached: set[str]) -> list[str]:
    uniq = list(dict.fromkeys(names))  # node order reads best
    others = sorted({i.name for ifaces in nodes.values() for i in ifaces if i.name} - attached)
    return [",".join(uniq), "=" + ",".join(uniq), "^" + ",".join(others), "^=" + ",".join(others)]


def advise(nodes: Nodes) -> Advice:
    """Propose NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME values that work on every node of ``nodes``."""
    if len(nodes) < 2:
        return Advice(None, reason="one node: the ranks talk over loopback; nothing to set")
    subnets = common_subnets(nodes)
    if not subnets:
        return Advice(None, reason="no IPv4 subnet is shared by every node: the nodes cannot reach each other "
                      "directly (check cabling/VLANs, or pick nodes on one network)")
    subnet, hosts = next(iter(subnets.items()))
    names = [a.ifname for a in hosts.values()]
    attached = set(names)
    values, per_node = {}, {}
    nccl = next((v for v in _nccl_candidates(names, nodes, attached) if works(NCCL, v, nodes, subnet)), None)
    if nccl is not None:
        values[NCCL] = nccl
    if len(attached) == 1 and works(GLOO, names[0], nodes, subnet):
        values[GLOO] = names[0]
    for host, att in hosts.items():
        env = {} if GLOO in values else {GLOO: att.ifname}
        if nccl is None:
            env[NCCL] = "=" + att.ifname
        if env:
            per_node[host] = env
    same = "the same name" if len(attached) == 1 else "different names (" + ", ".join(sorted(attached)) + ")"
    return Advice(subnet, values, per_node, dict(hosts), f"subnet {subnet} is on every node, under {same}")


def virtual_rank(ifname: str, virtual: bool | None = None) -> tuple[bool, bool]:
    """Sort key, best first: a NIC; then a software interface of an unknown kind (a container's veth eth0,
    a bridge over the NIC); last one named as a container/VM bridge, overlay or VPN (docker0, tailscale0)."""
    return ifname.startswith(_VIRTUAL), bool(virtual)


def node_address(host: str, nodes: Nodes, env: dict[str, str] | None = None) -> str | None:
    """``host``'s IPv4 address on a subnet every node shares (how the others should reach it: the master
    address, torchrun's --local-addr), preferring the interface the job's GLOO/NCCL_SOCKET_IFNAME selects
    there, never one on a virtual bridge; None when there is none (the caller keeps the host name)."""
    if host not in nodes:
        return None
    subnets = [hosts[host] for hosts in common_subnets(nodes).values()
               if not hosts[host].ifname.startswith(_VIRTUAL)]
    env = env or {}
    for var in (GLOO, NCCL):
        if env.get(var):
            wanted = {i.name for i in selected(var, env[var], nodes[host])}
            for att in subnets:
                if att.ifname in wanted:
                    return att.address
    return subnets[0].address if subnets else None


def describe_node(interfaces: Sequence[Interface]) -> str:
    """`eth0 10.0.0.2/24, ib0 10.1.0.2/16 (down)` for messages."""
    parts = []
    for i in interfaces:
        addrs = " ".join(i.ipv4) or "no IPv4"
        parts.append(f"{i.name} {addrs}" + ("" if i.up else " (down)"))
    return ", ".join(parts) or "no interfaces"
