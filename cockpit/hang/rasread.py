"""A node's live RAS answer (cockpit.node.rasask's record, riding in its transport record) -> NodeRas; the
RAS address a job's node script gives its ranks. Pure.

Which node RAS blames: RAS names a missing or dead process by the host address its peers know it by (the
bootstrap interface's), mapped here to the node that has that address (``ras_blame``). A report of RUNNING OK
clears nothing: RAS keeps its own TCP connections and does not see a stuck data path (NVIDIA/nccl#1730).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from cockpit.hang.ras import parse_ras_json, parse_ras_text
from cockpit.hang.rasreport import NodeRas, RasProcess
from cockpit.hang.transport import NodeTransport, normal_host
from cockpit.hang.transport_parse import TransportParseError

RAS_DEFAULT_ADDR = "localhost:28028"  # NCCL's default; the node side's cockpit.node.rasask says the same
_RAS_ADDR = re.compile(r"\bNCCL_RAS_ADDR=['\"]?([^'\"\s;]+)")
_RAS_OFF = re.compile(r"\bNCCL_RAS_ENABLE=['\"]?0\b")


def ras_address(script: str) -> str | None:
    """The RAS address a node script's ranks listen on: its last NCCL_RAS_ADDR, else NCCL's default; None
    when the job is not on nccl (COCKPIT_PG_BACKEND) or the script switches RAS off."""
    if "COCKPIT_PG_BACKEND=nccl" not in script or _RAS_OFF.search(script):
        return None
    found = _RAS_ADDR.findall(script)
    return found[-1] if found else RAS_DEFAULT_ADDR


def node_ras(raw: object, host: str = "?") -> NodeRas | None:
    """The record's RAS answer; None where none was asked (gloo, an older agent). A malformed record or an
    unreadable answer is a NodeRas in state error, never raised: the stacks and sockets still count."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        return NodeRas("?", "error", note=f"{host}: the RAS record is not a mapping")
    addr, state, text, fmt = str(raw.get("addr") or "?"), raw.get("state"), raw.get("text"), raw.get("format")
    ms = raw.get("ms") if isinstance(raw.get("ms"), (int, float)) else None
    note = str(raw["note"]) if raw.get("note") is not None else None
    fmt_s = fmt if fmt in ("json", "text") else None
    if state not in ("answered", "error") or not isinstance(text, str) or not text.strip():
        return NodeRas(addr, "none" if state == "none" else "error", None, fmt_s, ms,
                       note or ("no answer" if state != "none" else None))
    try:
        report = parse_ras_json(text, f"{host} RAS") if fmt == "json" else parse_ras_text(text, f"{host} RAS")
    except TransportParseError as exc:
        return NodeRas(addr, "error", None, fmt_s, ms, str(exc))
    return NodeRas(addr, "answered" if state == "answered" else "error", report, fmt_s, ms, note)


def ras_reports(nodes: Sequence[NodeTransport]) -> list[tuple[str, NodeRas]]:
    """(host, its NodeRas) of each node that asked RAS."""
    return [(n.host, n.ras) for n in nodes if n.ras is not None]


def ras_named(nodes: Sequence[NodeTransport]) -> list[RasProcess]:
    """Every process any node's RAS names as missing, dead or behind, once each."""
    seen: dict[tuple[object, ...], RasProcess] = {}
    for _host, r in ras_reports(nodes):
        for p in r.report.processes if r.report else ():
            seen.setdefault((p.state, p.rank, p.pid, p.host), p)
    return list(seen.values())


def ras_blame(nodes: Sequence[NodeTransport], addr_to_node: Mapping[str, str]) -> dict[str, list[RasProcess]]:
    """node -> the processes RAS names missing or dead there (MISMATCH, a rank behind, is not a dead node);
    a host RAS names that is no node of the gather keeps its own name."""
    addrs = {**addr_to_node, **{a: n.host for n in nodes for a in n.addresses}}
    out: dict[str, list[RasProcess]] = {}
    for p in ras_named(nodes):
        if p.state == "MISMATCH" or p.host is None:
            continue
        node = addrs.get(normal_host(p.host), p.host)
        out.setdefault(node, []).append(p)
    return out


def ras_all_ok(nodes: Sequence[NodeTransport]) -> NodeRas | None:
    """One RAS answer that says RUNNING OK, when every answer read says so (none names a process)."""
    read = [r for _h, r in ras_reports(nodes) if r.report is not None]
    ok = all(r.report is not None and r.report.ok and r.report.comm_states for r in read)
    return read[0] if read and ok else None
