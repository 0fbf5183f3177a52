"""Which node's link stopped a job whose ranks all wait in the same collective. Pure.

Each rank socket is stuck, slow, busy or idle (``classify``; the thresholds below were measured on a
4-namespace gloo lab, see tests/fixtures/deadlink/tcp/README.md). A stuck socket is an edge {observer node,
peer node}. The node common to every stuck edge, seen stuck by at least two other nodes, is named: a dead
ring neighbour leaves both its neighbours with data queued toward it. One pair alone cannot say which end
failed (both ends retransmit): node-local evidence breaks the tie (the interface down or without carrier,
an IB port not active, the node not answering), else the finding says "the link between A and B". Edges
without a common node (two faults) name nobody: the table is the answer. Nothing stuck and nothing slow:
no link finding (a rank hung in its own code leaves nothing queued).
"""

from __future__ import annotations

import ipaddress
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from cockpit.hang.rasread import ras_blame
from cockpit.hang.rasreport import RasProcess
from cockpit.hang.raswords import ras_said
from cockpit.hang.transport import NodeTransport, TcpSocket

# stuck: ESTAB, data queued, retransmit timer on, and >= 3 RTO expiries in a row without an ACK (>= 1.4 s at
# RTO min 200 ms). Measured: healthy and throttled sockets never passed backoff 1 (3 runs); the dead link's
# neighbours crossed 3 at 1.5 s (idle machine) / 2.3-2.5 s (loaded) after the fault and 5 by 10 s.
STUCK_BACKOFF = 3
# slow: smoothed RTT >= 20 ms and >= 10x the lower quartile of the job's other sockets that moved data, over >= 2
# samples. Measured under load: throttled (tbf 1 Mbit/s) sockets p50 146-334 ms, single samples down to 27 ms;
# every other socket p50 <= 4.3 ms, single samples up to 8 ms. The lower quartile, not the median: with 3 nodes
# in a ring, the slow node's connections are 4 of the 6 that carry data, so the median is one of them.
SLOW_RTT_MS = 20.0
SLOW_FACTOR = 10.0
SLOW_SAMPLES = 2
Kind = Literal["stuck", "slow", "busy", "idle"]


@dataclass(frozen=True)
class ConnRow:
    """One rank connection in the table a finding carries."""

    observer: str  # the node whose socket this is
    rank: int
    local: str
    peer: str
    peer_node: str  # the node the peer address belongs to (the address itself when unknown)
    kind: Kind
    send_q: int
    backoff: int | None
    retransmits: int | None
    lastack_ms: int | None
    srtt_ms: float | None
    peer_rank: int | None = None  # the rank owning the other end, where it was gathered (cockpit.hang.conntable)


@dataclass(frozen=True)
class EdgeEvidence:
    """The stuck (or slow) connections from one node to another."""

    observer: str
    peer: str
    sockets: int
    queued_bytes: int
    backoff_max: int
    retransmits: int  # retransmitted segments where ss said, else the RTO expiries (backoff)
    no_ack_s: float | None
    srtt_ms: float | None


@dataclass(frozen=True)
class LinkFinding:
    # dead_link: connections toward the node stuck; slow_link: its connections slow; unreachable: the node alone
    # did not answer the gather while the others did and no connection shows anything (TCP cannot confirm);
    # ras_missing: no connection shows anything, and NCCL's RAS names missing or dead processes on the node alone
    kind: Literal["dead_link", "slow_link", "unreachable", "ras_missing"]
    node: str
    iface: str | None
    edges: tuple[EdgeEvidence, ...]
    corroboration: tuple[str, ...]
    table: tuple[ConnRow, ...]


@dataclass(frozen=True)
class NoSingleNode:
    """The evidence names no node: say so and show the table. ``pair``: one pair of nodes only, with nothing
    node-local to say which end failed ("the link between A and B")."""

    reason: str
    edges: tuple[EdgeEvidence, ...]
    table: tuple[ConnRow, ...]
    pair: tuple[str, str] | None = None
    corroboration: tuple[str, ...] = ()


def classify(sock: TcpSocket, job_median_rtt: float | None = None, srtt_ms: float | None = None) -> Kind:
    """stuck | slow | busy | idle for one socket; ``srtt_ms``: its RTT over several samples (else its own)."""
    if sock.state == "ESTAB" and sock.send_q > 0 and sock.timer == "on" and (sock.backoff or 0) >= STUCK_BACKOFF:
        return "stuck"
    rtt = srtt_ms if srtt_ms is not None else sock.srtt_ms
    if (rtt is not None and job_median_rtt is not None and rtt >= SLOW_RTT_MS
            and rtt >= SLOW_FACTOR * job_median_rtt):
        return "slow"
    return "busy" if sock.send_q > 0 or sock.recv_q > 0 else "idle"


def link_finding(nodes: Sequence[NodeTransport], addr_to_node: Mapping[str, str],
                 earlier: Sequence[Sequence[NodeTransport]] = (), job_iface: Mapping[str, str] | None = None,
                 baseline: Mapping[str, NodeTransport] | None = None) -> LinkFinding | NoSingleNode | None:
    """The link finding from one gather (``nodes``; ``earlier``: previous gathers of the same job, which make
    the slow-link test possible); None when nothing is stuck or slow. ``job_iface``: node -> the interface the
    job uses, where known; ``baseline``: the same gather at job start (counters become deltas)."""
    addrs = {**addr_to_node, **{a: n.host for n in nodes for a in n.addresses}}
    blame = ras_blame(nodes, addr_to_node)  # node -> the processes NCCL's RAS names missing or dead there
    rtts = _rtts([*earlier, nodes])
    median = _job_median(rtts, [*earlier, nodes], addrs)
    table = tuple(_rows(nodes, addrs, rtts, median))
    stuck = _edges([r for r in table if r.kind == "stuck"])
    if stuck:
        return _judge("dead_link", stuck, table, nodes, job_iface or {}, baseline or {}, blame)
    slow = _edges([r for r in table if r.kind == "slow"])
    if slow:
        return _judge("slow_link", slow, table, nodes, job_iface or {}, baseline or {}, blame)
    return _unreachable(nodes, table, job_iface or {}, blame) or _ras_only(nodes, table, job_iface or {}, blame)


def _ras_only(nodes: Sequence[NodeTransport], table: tuple[ConnRow, ...], job_iface: Mapping[str, str],
              blame: Mapping[str, Sequence[RasProcess]]) -> LinkFinding | None:
    """The sockets say nothing, and NCCL's RAS names missing or dead processes on one node alone: that node
    (or its link: RAS's own connections to it broke). None when RAS names none, or several nodes."""
    if len(blame) != 1:
        return None
    x = next(iter(blame))
    return LinkFinding("ras_missing", x, _iface(x, {n.host: n for n in nodes}, job_iface), (), ras_said(x, blame),
                       table)


def _unreachable(nodes: Sequence[NodeTransport], table: tuple[ConnRow, ...], job_iface: Mapping[str, str],
                 blame: Mapping[str, Sequence[RasProcess]]) -> LinkFinding | None:
    """One node alone did not answer while every other did: the node or its link (its neighbours' sockets may
    have had nothing queued toward it when it went: they wait to receive). One other node that answered is
    enough: it shows cockpit's own network works, and in a two-node job it is all there is (the silent node,
    the slow one, owed the other data: nothing was queued toward it). None otherwise (two silent: no guess)."""
    silent = [n.host for n in nodes if not n.answered]
    answered = [n.host for n in nodes if n.answered]
    if len(silent) != 1 or not answered:
        return None
    x = silent[0]
    said = (f"{x} did not answer the gather while {', '.join(sorted(answered))} did", *ras_said(x, blame))
    return LinkFinding("unreachable", x, _iface(x, {n.host: n for n in nodes}, job_iface), (), said, table)


def _key(host: str, s: TcpSocket) -> tuple[str, str, str]:
    return host, str(s.local), str(s.peer)


def _rtts(gathers: Sequence[Sequence[NodeTransport]]) -> dict[tuple[str, str, str], list[float]]:
    out: dict[tuple[str, str, str], list[float]] = {}
    for nodes in gathers:
        for n in nodes:
            for s in n.sockets:
                if s.state == "ESTAB" and s.srtt_ms is not None:
                    out.setdefault(_key(n.host, s), []).append(s.srtt_ms)
    return out


def _job_median(rtts: Mapping[tuple[str, str, str], list[float]], gathers: Sequence[Sequence[NodeTransport]],
                addrs: Mapping[str, str]) -> dict[tuple[str, str, str], float]:
    """Per socket with >= SLOW_SAMPLES samples: the lower quartile RTT of the job's other sockets to other
    nodes that moved data between the first and the last gather (none when only one gather). Sockets within a
    node do not count: their RTT is loopback's, no link's."""
    if len(gathers) < SLOW_SAMPLES:
        return {}
    first = {_key(n.host, s): s for n in gathers[0] for s in n.sockets}
    moved = {_key(n.host, s) for n in gathers[-1] for s in n.sockets
             if _key(n.host, s) in first and _grew(first[_key(n.host, s)], s)
             and _node_of(s.peer.host, n.host, addrs) != n.host}
    mid = {k: statistics.median(v) for k, v in rtts.items() if len(v) >= SLOW_SAMPLES}
    out = {}
    for key in mid:
        others = [mid[k] for k in moved if k != key and k in mid]
        if others:
            out[key] = sorted(others)[(len(others) - 1) // 4]
    return out


def _node_of(peer: str, host: str, addrs: Mapping[str, str]) -> str:
    """The node a peer address belongs to: ``host`` itself for a loopback address (no link in between)."""
    if peer in addrs:
        return addrs[peer]
    try:
        return host if ipaddress.ip_address(peer).is_loopback else peer
    except ValueError:
        return peer


def _grew(a: TcpSocket, b: TcpSocket) -> bool:
    return any(x is not None and y is not None and y > x
               for x, y in ((a.bytes_acked, b.bytes_acked), (a.bytes_received, b.bytes_received)))


def _rows(nodes: Sequence[NodeTransport], addrs: Mapping[str, str], rtts: Mapping[tuple[str, str, str], list[float]],
          median: Mapping[tuple[str, str, str], float]) -> list[ConnRow]:
    rows = []
    for n in nodes:
        for r in n.ranks:
            for s in r.sockets:
                if s.state != "ESTAB":
                    continue
                peer_node = _node_of(s.peer.host, n.host, addrs)
                if peer_node == n.host:
                    continue  # within the node: no link in between
                key = _key(n.host, s)
                srtt = statistics.median(rtts[key]) if len(rtts.get(key, ())) >= SLOW_SAMPLES else None
                kind = classify(s, median.get(key), srtt)
                rows.append(ConnRow(n.host, r.rank, str(s.local), str(s.peer), peer_node, kind, s.send_q, s.backoff,
                                    s.retransmits, s.lastack_ms, srtt if srtt is not None else s.srtt_ms))
    return rows


def _edges(rows: Sequence[ConnRow]) -> tuple[EdgeEvidence, ...]:
    by: dict[tuple[str, str], list[ConnRow]] = {}
    for r in rows:
        by.setdefault((r.observer, r.peer_node), []).append(r)
    out = []
    for (obs, peer), rs in sorted(by.items()):
        acks = [r.lastack_ms for r in rs if r.lastack_ms is not None]
        rtt = [r.srtt_ms for r in rs if r.srtt_ms is not None]
        out.append(EdgeEvidence(obs, peer, len(rs), sum(r.send_q for r in rs), max((r.backoff or 0) for r in rs),
                                sum(r.retransmits if r.retransmits is not None else (r.backoff or 0) for r in rs),
                                max(acks) / 1000 if acks else None, statistics.median(rtt) if rtt else None))
    return tuple(out)


def _judge(kind: Literal["dead_link", "slow_link"], edges: tuple[EdgeEvidence, ...], table: tuple[ConnRow, ...],
           nodes: Sequence[NodeTransport], job_iface: Mapping[str, str], baseline: Mapping[str, NodeTransport],
           blame: Mapping[str, Sequence[RasProcess]]) -> LinkFinding | NoSingleNode:
    pairs = [frozenset((e.observer, e.peer)) for e in edges]
    common = set.intersection(*(set(p) for p in pairs))
    by_host = {n.host: n for n in nodes}
    named = [x for x in sorted(common) if len({o for p in pairs for o in p if o != x}) >= 2]
    if len(named) == 1:
        x = named[0]
        return LinkFinding(kind, x, _iface(x, by_host, job_iface), edges,
                           local_faults(x, by_host.get(x), baseline.get(x)) + ras_said(x, blame), table)
    if len(common) == 2:  # one pair: which end? only node-local evidence (or RAS naming one end) can say
        a, b = sorted(common)
        said = {h: local_faults(h, by_host.get(h), baseline.get(h)) + ras_said(h, blame) for h in (a, b)}
        broken = [h for h in (a, b) if said[h]]
        if len(broken) == 1:
            x = broken[0]
            return LinkFinding(kind, x, _iface(x, by_host, job_iface), edges, said[x], table)
        why = "both ends show a local fault" if len(broken) == 2 else "neither end shows a local fault"
        return NoSingleNode(f"one pair only ({a}, {b}): TCP cannot say which end failed, and {why}", edges,
                            table, (a, b), said[a] + said[b])
    if not common:
        return NoSingleNode("the stuck connections have no node in common (more than one fault?)", edges, table)
    return NoSingleNode("the stuck connections do not single out one node", edges, table)


def local_faults(host: str, node: NodeTransport | None, base: NodeTransport | None) -> tuple[str, ...]:
    """What the node itself shows wrong with its links (empty: nothing, or it was not asked)."""
    if node is None:
        return ()
    if not node.answered:
        return (f"{host} did not answer the gather",)
    out = []
    before = {i.name: i for i in base.ifaces} if base else {}
    for i in node.ifaces:
        if i.operstate == "down" or i.carrier is False:
            out.append(f"{host}'s {i.name} is {i.operstate or 'down'}" + (", no carrier" if i.carrier is False else ""))
        elif i.name in before and None not in (i.carrier_down_count, before[i.name].carrier_down_count):
            grown = (i.carrier_down_count or 0) - (before[i.name].carrier_down_count or 0)
            if grown > 0:
                out.append(f"{host}'s {i.name} lost carrier {grown} time(s) since the job started")
    for p in node.ib_ports:
        if p.active is False:
            out.append(f"{host}'s {p.device} port {p.port} is {p.state} ({p.phys_state or '?'})")
    return tuple(out)


def _iface(host: str, by_host: Mapping[str, NodeTransport], job_iface: Mapping[str, str]) -> str | None:
    """The job's interface on ``host``: its script's, else the one interface it shows down, else the one
    interface its ranks' connections use (the agent lists those only: cockpit.hang.transport_raw)."""
    if host in job_iface:
        return job_iface[host]
    node = by_host.get(host)
    down = [i.name for i in node.ifaces if i.operstate == "down" or i.carrier is False] if node else []
    if len(down) == 1:
        return down[0]
    return node.ifaces[0].name if node is not None and not down and len(node.ifaces) == 1 else None
