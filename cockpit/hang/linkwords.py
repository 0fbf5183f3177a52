"""A link finding's words, its JSON form (status.json, diagnose --json: with the per-connection table) and
the per-node link rows `cockpit stacks` prints. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from cockpit.hang.conntable import conn_table
from cockpit.hang.linkfind import ConnRow, EdgeEvidence, LinkFinding, NoSingleNode, link_finding, local_faults
from cockpit.hang.rasread import ras_all_ok
from cockpit.hang.raswords import RAS_NOT_CLEAR, ras_json, ras_rows
from cockpit.hang.transport import NodeTransport, TransportGather

Json = dict[str, Any]
TABLE_KEEP = 64  # rows in status.json: the stuck and slow ones first; the report file has them all
CONN_LINES = 32  # connection rows `cockpit stacks` prints (stuck and slow first); --json has them all


def size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.0f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def _names(hosts: Sequence[str]) -> str:
    hosts = sorted(set(hosts))
    return hosts[0] if len(hosts) == 1 else ", ".join(hosts[:-1]) + " and " + hosts[-1]


def link_text(f: LinkFinding | NoSingleNode) -> str:
    """One sentence for the STALL line and the finding."""
    queued = sum(e.queued_bytes for e in f.edges)
    retrans = sum(e.retransmits for e in f.edges)
    if isinstance(f, NoSingleNode) and f.pair is not None:
        a, b = f.pair
        return (f"the link between {a} and {b} is the likely fault: their connections have {size(queued)} "
                f"unacked, {retrans} retransmissions; {f.reason}")
    if isinstance(f, NoSingleNode):
        return f"no single node's link is to blame: {f.reason}; see the connection table"
    x = f.node
    if f.kind == "ras_missing":
        return (f"{x}" + (f" ({f.iface})" if f.iface else "") + f" or its link is the likely fault: "
                f"{f.corroboration[0]} there; no connection shows data queued toward it, so TCP does not confirm it")
    if f.kind == "unreachable":
        return (f"{x}'s link" + (f" ({f.iface})" if f.iface else "") + f" or {x} itself is the likely fault: "
                f"{f.corroboration[0]}; no connection shows data queued toward it, so TCP does not confirm it")
    peers = sorted({e.observer if e.peer == x else e.peer for e in f.edges})
    toward = [e for e in f.edges if e.peer == x] or list(f.edges)  # the neighbours' view: x may be silent
    queued, retrans = sum(e.queued_bytes for e in toward), sum(e.retransmits for e in toward)
    link = f"{x}'s link" + (f" ({f.iface})" if f.iface else "")
    if f.kind == "slow_link":
        rtt = [e.srtt_ms for e in f.edges if e.srtt_ms is not None]
        return (f"{link} is slow: its connections to {_names(peers)} run at {min(rtt):.0f}-{max(rtt):.0f} ms RTT "
                f"with {retrans} retransmissions; no other pair is slow" if rtt else f"{link} is slow")
    backoff = max(e.backoff_max for e in toward)
    return (f"{link} is the likely fault: its connections to {_names(peers)} have {size(queued)} unacked, "
            f"{retrans} retransmissions (backoff {backoff}), none stuck between other pairs")


def link_hint(f: LinkFinding | NoSingleNode, run_ref: str = "RUN") -> str:
    if isinstance(f, NoSingleNode):
        return ("check the links of the nodes in the table (cables, switch ports, `ip -s link`); "
                f"`cockpit diagnose {run_ref} --json` has every connection")
    port = f"{f.node}'s port" + (f" ({f.iface})" if f.iface else "")
    return (f"check {port} and its switch port (`ip -s link` on {f.node}); run again without it: "
            f"`cockpit run JOB --exclude {f.node}`, or list spares in spare_nodes")


def link_dict(f: LinkFinding | NoSingleNode, silent: Sequence[str] = (), run_ref: str = "RUN",
              waited_s: float | None = None) -> Json:
    """The finding's ``link`` key: kind, node, iface, evidence, and the connection table."""
    rows = sorted(f.table, key=lambda r: (r.kind not in ("stuck", "slow"), r.observer, r.rank, r.peer))
    out: Json = {"kind": "no_single_node" if isinstance(f, NoSingleNode) else f.kind,
                 "node": None if isinstance(f, NoSingleNode) else f.node,
                 "iface": None if isinstance(f, NoSingleNode) else f.iface,
                 "pair": list(f.pair) if isinstance(f, NoSingleNode) and f.pair else None,
                 "corroboration": list(f.corroboration),
                 "reason": f.reason if isinstance(f, NoSingleNode) else None,
                 "silent": sorted(silent), "waited_s": waited_s, "edges": [asdict(e) for e in f.edges],
                 "table": [asdict(r) for r in rows[:TABLE_KEEP]], "table_rows": len(rows)}
    out["text"], out["hint"] = link_text(f), link_hint(f, run_ref)
    return out


def node_rows(nodes: Sequence[NodeTransport], table: Sequence[ConnRow] = (),
              waited_s: float | None = None) -> list[str]:
    """One line per node: its interfaces, and its connections by class (what `cockpit stacks` prints);
    ``waited_s``: how long the gather waited for the silent ones."""
    lines = []
    within = f" within {waited_s:.1f} s" if waited_s is not None else ""
    for n in sorted(nodes, key=lambda n: n.host):
        if not n.answered:
            lines.append(f"link {n.host}: silent, no answer{within} (unreachable: its link may be down)")
            continue
        ifs = ", ".join(f"{i.name} {i.operstate or '?'}" + ("" if i.carrier is not False else " no-carrier")
                        for i in n.ifaces) or "no interfaces read"
        mine = [r for r in table if r.observer == n.host]
        counts = {k: sum(r.kind == k for r in mine) for k in ("stuck", "slow", "busy", "idle")}
        said = ", ".join(f"{v} {k}" for k, v in counts.items() if v) or "none to other nodes"
        faults = local_faults(n.host, n, None)
        lines.append(f"link {n.host}: {ifs}; connections: {said} ({n.source})"
                     + (f"; {'; '.join(faults)}" if faults else ""))
    return lines


def edge_line(e: EdgeEvidence) -> str:
    ack = f", no ack for {e.no_ack_s:.1f} s" if e.no_ack_s is not None else ""
    rtt = f", rtt {e.srtt_ms:.1f} ms" if e.srtt_ms is not None else ""
    return (f"{e.observer} -> {e.peer}: {e.sockets} connection(s), {size(e.queued_bytes)} queued, backoff "
            f"{e.backoff_max}, {e.retransmits} retransmissions{ack}{rtt}")


def conn_line(r: ConnRow) -> str:
    """One connection: "rank 0 (hostA) 10.0.0.1:40310 -> rank 1 (hostB) 10.0.0.2:51234: idle, 0 B queued"."""
    peer = f"rank {r.peer_rank} ({r.peer_node})" if r.peer_rank is not None else f"{r.peer_node} (no rank)"
    extra = [f"backoff {r.backoff}"] if r.backoff else []
    extra += [f"{r.retransmits} retransmissions"] if r.retransmits else []
    extra += [f"rtt {r.srtt_ms:.1f} ms"] if r.srtt_ms is not None else []
    return (f"conn rank {r.rank} ({r.observer}) {r.local} -> {peer} {r.peer}: {r.kind}, {size(r.send_q)} queued"
            + "".join(f", {x}" for x in extra))


def connections(g: TransportGather, keep: int = TABLE_KEEP) -> Json:
    """Every rank connection of the gather (cockpit.hang.conntable), for a hang finding and `stacks --json`:
    the first ``keep`` rows (stuck and slow first) and how many there were."""
    rows = conn_table(g)
    out: Json = {"rows": [asdict(r) for r in rows[:keep]], "rows_total": len(rows), "silent": list(g.silent),
                 "waited_s": g.waited_s}
    ras = ras_json(g.nodes)
    return {**out, "ras": ras} if ras else out


def gathered_link(g: TransportGather, run_ref: str = "RUN") -> Json | None:
    """A hang finding's ``link`` key from the gather made with its stacks; None when no connection is stuck
    or slow (a rank hung in its own code, a healthy job): no link finding."""
    f = link_finding(g.nodes, g.addr_to_node, job_iface=g.job_iface)
    return None if f is None else link_dict(f, g.silent, run_ref, g.waited_s)


def link_summary(g: TransportGather) -> list[str]:
    """A row per node, then the link finding (or that there is none) and its edges: the TUI's link rows."""
    f = link_finding(g.nodes, g.addr_to_node, job_iface=g.job_iface)
    lines = node_rows(g.nodes, f.table if f is not None else (), g.waited_s)
    lines += [f"link error: {e}" for e in g.errors] + ras_rows(g.nodes)
    if f is None:
        return [*lines, "no connection is stuck or slow: no link finding"]
    return [*lines, link_text(f), *("   " + edge_line(e) for e in f.edges)]


def ras_ok_words(g: TransportGather) -> str | None:
    """"NCCL RAS says RUNNING OK, which clears nothing ..." where every RAS answer gathered says so; None
    otherwise. The caller says it where every rank waits in the same collective: there RAS's OK is what
    misleads (NVIDIA/nccl#1730)."""
    ok = ras_all_ok(g.nodes)
    if ok is None or ok.report is None:
        return None
    return f"NCCL {ok.report.version or '?'} RAS says RUNNING OK, {RAS_NOT_CLEAR}"


def link_lines(g: TransportGather) -> list[str]:
    """What `cockpit stacks` prints under its stacks: link_summary, then the ranks' connections (CONN_LINES of
    them, stuck and slow first)."""
    rows = conn_table(g)
    more = [f"conn ... {len(rows) - CONN_LINES} more (`cockpit stacks RUN --json` lists them all)"]
    return [*link_summary(g), *(conn_line(r) for r in rows[:CONN_LINES]), *(more if len(rows) > CONN_LINES else [])]
