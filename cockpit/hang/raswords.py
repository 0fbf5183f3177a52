"""NCCL RAS answers in words and JSON: a row per node for `cockpit stacks` and the TUI, the ``ras`` entry
per node of a hang finding's connections (status.json, diagnose --json), what RAS adds to a link finding.
Pure. RUNNING OK is never said as a clearance: RAS does not see a stuck data path (NVIDIA/nccl#1730)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from cockpit.hang.rasread import ras_reports
from cockpit.hang.rasreport import NodeRas, RasProcess
from cockpit.hang.transport import NodeTransport

Json = dict[str, Any]
RAS_NOT_CLEAR = "which clears nothing: RAS does not see a stuck data path (NVIDIA/nccl#1730)"


def process_words(p: RasProcess) -> str:
    """"rank 7 (pid 3748990 on 10.0.0.3) INCOMPLETE"."""
    who = f"rank {p.rank}" if p.rank is not None else f"process {p.pid}" if p.pid is not None else "a process"
    where = [f"pid {p.pid}"] if p.rank is not None and p.pid is not None else []
    where += [f"on {p.host}"] if p.host else []
    return f"{who}" + (f" ({' '.join(where)})" if where else "") + f" {p.state}"


def ras_said(host: str, blame: Mapping[str, Sequence[RasProcess]]) -> tuple[str, ...]:
    """What RAS says against ``host`` (cockpit.hang.rasread.ras_blame), for a link finding's corroboration."""
    named = blame.get(host) or ()
    return (f"NCCL RAS names {', '.join(process_words(p) for p in named)}",) if named else ()


def states_words(r: NodeRas) -> str:
    """"RUNNING OK (1 communicator)", or each state with its count."""
    rep = r.report
    if rep is None:
        return "no report"
    n = len(rep.comm_states)
    if rep.ok and n:
        return f"RUNNING OK ({n} communicator{'s' if n != 1 else ''})"
    counts: dict[str, int] = {}
    for _comm, state in rep.comm_states:
        counts[state] = counts.get(state, 0) + 1
    return ", ".join(f"{k} x{v}" if v > 1 else k for k, v in counts.items()) or "no communicator data"


def ras_row(host: str, r: NodeRas) -> str:
    """One node's RAS answer in a line (what `cockpit stacks` prints under the link rows)."""
    if r.state == "none":
        return f"ras {host}: none at {r.addr}: {r.note or 'nothing listens'}"
    if r.report is None:
        return f"ras {host}: no report from {r.addr}: {r.note or 'no answer'}"
    took = f", {r.ms:.0f} ms" if r.ms is not None else ""
    named = r.report.processes
    text = (f"ras {host}: NCCL {r.report.version or '?'} ({r.fmt or '?'}{took}): {states_words(r)}"
            + (f"; names {', '.join(process_words(p) for p in named[:8])}" if named else "")
            + (f" and {len(named) - 8} more" if len(named) > 8 else ""))
    return text + (f" ({r.note})" if r.note else "")


def ras_rows(nodes: Sequence[NodeTransport]) -> list[str]:
    return [ras_row(host, r) for host, r in ras_reports(nodes)]


def ras_dict(host: str, r: NodeRas) -> Json:
    rep = r.report
    return {"node": host, "addr": r.addr, "state": r.state, "format": r.fmt, "ms": r.ms, "note": r.note,
            "version": rep.version if rep else None, "ok": rep.ok if rep else None,
            "comm_states": [{"comm": c, "state": s} for c, s in rep.comm_states] if rep else [],
            "processes": [asdict(p) for p in rep.processes] if rep else [],
            "repaired": rep.repaired if rep else None}


def ras_json(nodes: Sequence[NodeTransport]) -> list[Json]:
    """The ``ras`` entry per node that asked RAS: version, communicators' states, processes named."""
    return [ras_dict(host, r) for host, r in ras_reports(nodes)]
