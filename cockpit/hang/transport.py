"""Transport evidence of a stalled job, as typed records: each rank's TCP sockets (from `ss -tinoe` or
/proc/<pid>/net/tcp), each node's interfaces and InfiniBand ports. Pure: filled by
cockpit.hang.transport_parse from the raw text the node agent sends, judged by cockpit.hang.linkfind.

Unknown is None: the /proc source has no RTT, no bytes counters and no last-send times, so those fields
stay None there; a reader never guesses them."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from cockpit.hang.rasreport import NodeRas

Timer = Literal["on", "persist", "keepalive", "timewait", "none"]
TcpState = Literal["ESTAB", "SYN-SENT", "SYN-RECV", "FIN-WAIT-1", "FIN-WAIT-2", "TIME-WAIT", "CLOSE",
                   "CLOSE-WAIT", "LAST-ACK", "LISTEN", "CLOSING", "UNKNOWN"]


def normal_host(host: str) -> str:
    """An address as one node calls it: ``::ffff:a.b.c.d`` (an IPv4-mapped IPv6 socket) is ``a.b.c.d``;
    brackets and an interface suffix (``%eth0``) go."""
    host = host.strip("[]").split("%", 1)[0]
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


@dataclass(frozen=True)
class Endpoint:
    host: str  # normalised (normal_host)
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class TcpSocket:
    """One TCP socket as the kernel reports it. ``backoff``: consecutive RTO expiries without an ACK (ss
    ``backoff``; /proc ``retrnsmt``); ``send_q``: bytes queued and not acked (ss Send-Q; /proc tx_queue)."""

    local: Endpoint
    peer: Endpoint
    state: TcpState
    send_q: int
    recv_q: int
    timer: Timer = "none"
    backoff: int | None = None
    retransmits: int | None = None  # segments retransmitted in all (ss retrans:a/TOTAL)
    rto_ms: float | None = None
    unacked: int | None = None
    lastsnd_ms: int | None = None
    lastrcv_ms: int | None = None
    lastack_ms: int | None = None
    bytes_acked: int | None = None
    bytes_received: int | None = None
    bytes_retrans: int | None = None
    srtt_ms: float | None = None
    delivery_bps: float | None = None
    busy_ms: int | None = None
    app_limited: bool | None = None
    inode: int | None = None
    pid: int | None = None  # the owning process, where ss -p said


@dataclass(frozen=True)
class IfaceState:
    """/sys/class/net/<name>: ``carrier`` None where it cannot be read (EINVAL on an interface set down)."""

    name: str
    operstate: str | None
    carrier: bool | None
    carrier_down_count: int | None


@dataclass(frozen=True)
class IbPort:
    """/sys/class/infiniband/<device>/ports/<port>: state "4: ACTIVE", phys_state "5: LinkUp", link_layer
    InfiniBand | Ethernet; counters None where unreadable ("N/A (no PMA)")."""

    device: str
    port: int
    state: str | None
    phys_state: str | None
    link_layer: str | None
    counters: Mapping[str, int | None] = field(default_factory=dict)

    @property
    def active(self) -> bool | None:
        if self.state is None:
            return None
        return self.state.split(":")[-1].strip().upper() == "ACTIVE"


@dataclass(frozen=True)
class RankTransport:
    rank: int
    pid: int | None
    sockets: tuple[TcpSocket, ...]  # the rank's own (its fds'), every state
    listen: tuple[Endpoint, ...] = ()


@dataclass(frozen=True)
class NodeTransport:
    """What one node's agent read. ``answered`` False: the node gave nothing within the gather's deadline
    (its link may be down, and SSH with it): listed as silent."""

    host: str
    taken_at: float | None
    ranks: tuple[RankTransport, ...] = ()
    ifaces: tuple[IfaceState, ...] = ()
    ib_ports: tuple[IbPort, ...] = ()
    addresses: tuple[str, ...] = ()  # the node's own addresses (normalised)
    answered: bool = True
    source: Literal["ss", "proc", "none"] = "none"
    ras: NodeRas | None = None  # NCCL's RAS service on the node, asked with the stacks (nccl jobs only)

    @property
    def sockets(self) -> tuple[TcpSocket, ...]:
        return tuple(s for r in self.ranks for s in r.sockets)


@dataclass(frozen=True)
class TransportGather:
    """One gather of every node of a run, made with the stacks: the nodes that answered and those that did
    not (``answered`` False), which node each known address belongs to, and the interface the job uses on
    each node where its scripts name one (GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME)."""

    nodes: tuple[NodeTransport, ...]
    addr_to_node: Mapping[str, str] = field(default_factory=dict)
    job_iface: Mapping[str, str] = field(default_factory=dict)
    errors: tuple[str, ...] = ()  # a node's record that could not be read: said, never raised
    waited_s: float | None = None  # how long the gather waited before listing the silent nodes, where known

    @property
    def silent(self) -> tuple[str, ...]:
        return tuple(n.host for n in self.nodes if not n.answered)
