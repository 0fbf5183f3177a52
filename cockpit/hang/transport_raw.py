"""The node agent's raw transport record (JSON: text as read, no parsing on the node) -> NodeTransport. Pure.

    {"host": str, "time": float, "addresses": [str],
     "ranks": [{"rank": int, "pid": int, "fd": "<fd listing>", "tcp": "<net/tcp>", "tcp6": "<net/tcp6>"}],
     "ss": "<ss -tinoepH of the node>" | null,
     "ifaces": {name: {"operstate": str, "carrier": str, "carrier_down_count": str, "addresses": [str]}},
     "ib": {"<device>/<port>": {"state": str, "phys_state": str, "link_layer": str, "counters/<name>": str}},
     "ras": <cockpit.node.rasask's record> (nccl jobs only)}

ss is preferred (RTT, retransmissions, last ack); /proc/<pid>/net/tcp{,6} stands in where ss is missing.
Either way only the rank's own sockets count: the inodes of its /proc/<pid>/fd (an earlier job's orphans
toward the same node keep retransmitting for minutes: recorded in tests/fixtures/deadlink/tcp/README.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cockpit.hang.rasread import node_ras
from cockpit.hang.transport import NodeTransport, RankTransport, TcpSocket, normal_host
from cockpit.hang.transport_parse import (
    TransportParseError,
    parse_fd_sockets,
    parse_ib_port,
    parse_iface,
    parse_proc_net_tcp,
    parse_ss,
)


def silent(host: str) -> NodeTransport:
    """A node that gave nothing within the gather's deadline."""
    return NodeTransport(host, None, answered=False)


def node_transport(raw: Mapping[str, Any], where: str = "agent") -> NodeTransport:
    """Parse one node's raw record; TransportParseError (where: what, hint) for anything malformed."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("host"), str):
        raise TransportParseError(where, 1, "not a transport record (no host)", "the node agent's `transport` output")
    host = raw["host"]
    ss_text = raw.get("ss")
    ss = parse_ss(ss_text, f"{where} {host} ss") if isinstance(ss_text, str) and ss_text.strip() else None
    ranks = tuple(_rank(host, r, ss, where) for r in _list(raw, "ranks", where))
    ifaces = tuple(parse_iface(name, _strs(files)) for name, files in sorted(_map(raw, "ifaces", where).items())
                   if _carries_job(files, ranks))
    ports = []
    for key, files in sorted(_map(raw, "ib", where).items()):
        device, _, port = key.rpartition("/")
        if not device or not port.isdigit():
            raise TransportParseError(where, 1, f"{host}: IB port key {key!r} is not <device>/<port>")
        ports.append(parse_ib_port(device, int(port), _strs(files)))
    addresses = tuple(normal_host(str(a).split("/")[0]) for a in _list(raw, "addresses", where))
    taken = raw.get("time")
    return NodeTransport(host, float(taken) if isinstance(taken, (int, float)) else None, ranks, ifaces,
                         tuple(ports), addresses, True, "ss" if ss is not None else "proc" if ranks else "none",
                         node_ras(raw.get("ras"), host))


def _rank(host: str, r: Any, ss: list[TcpSocket] | None, where: str) -> RankTransport:
    if not isinstance(r, Mapping) or not isinstance(r.get("rank"), int):
        raise TransportParseError(where, 1, f"{host}: a rank entry without a rank number: {str(r)[:60]!r}")
    pid = r.get("pid") if isinstance(r.get("pid"), int) else None
    inodes = parse_fd_sockets(str(r.get("fd") or ""))
    if ss is not None:
        mine = [s for s in ss if s.inode and s.inode in inodes] or [s for s in ss if pid and s.pid == pid]
    else:
        mine = []
        for name in ("tcp", "tcp6"):
            text = r.get(name)
            if isinstance(text, str):
                mine += parse_proc_net_tcp(text, inodes, f"{where} {host} rank {r['rank']} /proc/net/{name}")
    listen = tuple(s.local for s in mine if s.state == "LISTEN")
    return RankTransport(r["rank"], pid, tuple(s for s in mine if s.state != "LISTEN"), listen)


def _list(raw: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = raw.get(key)
    value = [] if value is None else value
    if not isinstance(value, list):
        raise TransportParseError(where, 1, f"{raw.get('host')}: {key} is not a list")
    return value


def _map(raw: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = raw.get(key)
    value = {} if value is None else value
    if not isinstance(value, Mapping) or not all(isinstance(v, Mapping) for v in value.values()):
        raise TransportParseError(where, 1, f"{raw.get('host')}: {key} is not a mapping of mappings")
    return value


def _strs(files: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): v for k, v in files.items() if isinstance(v, str)}


def _carries_job(files: Mapping[str, Any], ranks: tuple[RankTransport, ...]) -> bool:
    """An interface whose addresses the ranks' sockets use (a down docker0 or spare port says nothing about
    the job's link); every interface when the record lists no addresses or the ranks have no sockets."""
    addrs = files.get("addresses")
    used = {s.local.host for r in ranks for s in r.sockets}
    if not isinstance(addrs, list) or not used:
        return True
    return bool(used & {normal_host(str(a)) for a in addrs})
