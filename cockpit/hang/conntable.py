"""Every connection of a run's ranks, node to node and within a node, with the rank at the other end: the
table `cockpit stacks` prints and a hang finding carries (``connections``), whether or not a link is to
blame. Pure: from one TransportGather.

The other end's rank is found by its endpoint: a peer address and port that is another rank's own socket
(the reverse side of the same connection) or listening socket. Loopback endpoints are only unique within a
node, so they are looked up among the observer's node's ranks; a peer no rank owns (the TCPStore's server in
torchrun's agent, another process) has no rank. Kinds as cockpit.hang.linkfind.classify says, per socket.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from cockpit.hang.linkfind import ConnRow, classify
from cockpit.hang.transport import Endpoint, NodeTransport, TransportGather

Owner = tuple[str, int]  # (node, rank)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def owners(nodes: tuple[NodeTransport, ...]) -> dict[tuple[str | None, Endpoint], Owner]:
    """(node for a loopback endpoint else None, endpoint) -> the (node, rank) whose socket it is."""
    out: dict[tuple[str | None, Endpoint], Owner] = {}
    for n in nodes:
        for r in n.ranks:
            for ep in (*(s.local for s in r.sockets if s.state == "ESTAB"), *r.listen):
                out.setdefault((n.host if _loopback(ep.host) else None, ep), (n.host, r.rank))
    return out


def conn_table(g: TransportGather) -> tuple[ConnRow, ...]:
    """One row per established socket of every rank that answered, by node, rank and peer."""
    addrs: Mapping[str, str] = {**g.addr_to_node, **{a: n.host for n in g.nodes for a in n.addresses}}
    own = owners(g.nodes)
    rows = []
    for n in g.nodes:
        for r in n.ranks:
            for s in r.sockets:
                if s.state != "ESTAB":
                    continue
                owner = own.get((n.host if _loopback(s.peer.host) else None, s.peer))
                peer_node = owner[0] if owner else n.host if _loopback(s.peer.host) else addrs.get(s.peer.host,
                                                                                                    s.peer.host)
                rows.append(ConnRow(n.host, r.rank, str(s.local), str(s.peer), peer_node, classify(s), s.send_q,
                                    s.backoff, s.retransmits, s.lastack_ms, s.srtt_ms, owner[1] if owner else None))
    return tuple(sorted(rows, key=lambda x: (x.kind not in ("stuck", "slow"), x.observer, x.rank,
                                             x.peer_rank if x.peer_rank is not None else 1 << 30, x.peer)))
