"""The ranks' own transport records (``logs/rank-R.HOST.links``, written by the rank hook's companion
cockpit.node.ranklinks when it answers a request) -> the run's TransportGather (cockpit.hang.transport), the
same one the node agent's records give on an ssh run: where no agent of cockpit's runs on the nodes (Slurm),
each rank reads its own sockets, and the run directory on the shared filesystem brings them here.

A node's ranks are merged into one node record (the node agent's shape, cockpit.hang.transport_raw): their
rank entries side by side, the `ss` rows of each (each rank keeps its own sockets' only), the interfaces and
IB ports of the newest, the RAS answer of the rank that asked (the node's first: cockpit.node.ranklinks). A
record that cannot be read, or that says why the rank could not read its sockets, is said in ``errors``. A
node none of whose ranks wrote a record for this request is said there too and left out, not listed as silent:
here the ranks answer, not an agent, so a node whose ranks are stopped or frozen (a hang of their own) would
otherwise read as a node cut off (cockpit.hang.linkfind's ``unreachable``). A dead link is still named from the
other nodes' stuck connections toward it (two observers).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cockpit.fs import safeio
from cockpit.hang.transport import NodeTransport, TransportGather
from cockpit.hang.transport_parse import TransportParseError
from cockpit.hang.transport_raw import node_transport, silent
from cockpit.hang.transportgather import job_iface
from cockpit.run import layout

LINKS_READ_BYTES = (4 << 20) + 4096  # what the rank writes at most (cockpit.node.ranklinks), and some
ASK_TIMEOUT_S = 8.0  # the hook looks once a second; `ss` may take up to 3 s; a loaded node, the rest
_REQ = re.compile(r'"l?req":"([^"]*)"')


def merged(host: str, raws: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One node's raw record from its ranks' (each the node agent's shape for that rank alone)."""
    newest = max(raws, key=_time)
    ss = [r.get("ss") for r in raws]
    ranks = [e for r in raws for e in _entries(r)]
    addresses = sorted({str(a) for r in raws for a in (r.get("addresses") or []) if isinstance(a, str)})
    ras = next((r["ras"] for r in sorted(raws, key=_time, reverse=True) if r.get("ras") is not None), None)
    return {"host": host, "time": newest.get("time"), "addresses": addresses, "ranks": ranks, "ras": ras,
            # one rank without `ss` rows: every rank's /proc rows instead (transport_raw reads one or the other)
            "ss": "".join(s for s in ss if isinstance(s, str)) if all(isinstance(s, str) for s in ss) else None,
            "ifaces": newest.get("ifaces") or {}, "ib": newest.get("ib") or {}}


def _time(raw: Mapping[str, Any]) -> float:
    taken = raw.get("time")
    return float(taken) if isinstance(taken, (int, float)) else 0.0


def _entries(raw: Mapping[str, Any]) -> list[Any]:
    ranks = raw.get("ranks")
    return ranks if isinstance(ranks, list) else []


def gather_ranks(records: Mapping[int, tuple[str, object]], request: str | None,
                 script: str | None = None) -> TransportGather:
    """``records``: rank -> (host, its .links file's JSON value, None where it has none). Only records of
    ``request`` count, as the dump's or the links-only request (None: the newest of any). ``script``: the
    run's batch script, for the job's interface."""
    by_host: dict[str, list[Mapping[str, Any]]] = {}
    errors: list[str] = []
    for rank, (host, value) in sorted(records.items()):
        by_host.setdefault(host, [])
        if not isinstance(value, Mapping) or (request is not None and request not in (value.get("req"),
                                                                                     value.get("lreq"))):
            continue  # not answered (yet), or an earlier request's
        if "error" in value:
            errors.append(f"{host}: rank {rank} could not read its sockets: {value['error']}")
        elif isinstance(value.get("raw"), Mapping) and isinstance(value["raw"].get("ranks"), list):
            by_host[host].append(value["raw"])
        else:
            errors.append(f"{host}: rank {rank}'s links record has no raw record with a list of ranks "
                          "(hint: written by another cockpit's hook?)")
    nodes: list[NodeTransport] = []
    for host, raws in sorted(by_host.items()):
        if not raws:  # its ranks are stopped, frozen or gone: their silence says nothing of the node's link
            errors.append(f"{host}: no rank there wrote its links for this request (stopped, frozen, exited, or "
                          "a hook without links); left out of the link finding")
            continue
        try:
            nodes.append(node_transport(merged(host, raws), f"{host} rank links"))
        except TransportParseError as exc:
            errors.append(str(exc))
            nodes.append(silent(host))
    iface = job_iface(script) if script else None
    return TransportGather(tuple(nodes), {}, {n.host: iface for n in nodes} if iface else {}, tuple(errors))


def read_rank_links(run_dir: Path, hosts: Mapping[int, str], request: str | None) -> TransportGather:
    """The ranks' (rank -> host) .links files for ``request``, read from the run directory."""
    records: dict[int, tuple[str, object]] = {}
    errors: list[str] = []
    for rank, host in hosts.items():
        path = layout.rank_file(run_dir, rank, host, "links")
        try:
            records[rank] = (host, safeio.loads(safeio.read_bytes(path, LINKS_READ_BYTES)))
        except FileNotFoundError:
            records[rank] = (host, None)
        except (OSError, ValueError) as exc:
            records[rank] = (host, None)
            errors.append(f"{path}: unreadable ({type(exc).__name__}: {exc}); hint: the rank rewrites it "
                          "at the next request")
    try:
        script = safeio.read_text(run_dir / layout.SBATCH_SCRIPT, 1 << 20)
    except OSError:
        script = None
    found = gather_ranks(records, request, script)
    return TransportGather(found.nodes, found.addr_to_node, found.job_iface, (*errors, *found.errors))


def ask_rank_links(run_dir: Path, hosts: Mapping[int, str], timeout: float = ASK_TIMEOUT_S,
                   every: float = 0.2) -> TransportGather:
    """Ask the ranks (rank -> host) for their links alone (``logs/links.req``: no stacks, no Flight Recorder
    dump; the hook looks for it once a second) and read what they wrote within ``timeout``; the ranks that
    did not answer by then count as their node's silence."""
    from cockpit.hang.evidence import new_request

    request = new_request()
    safeio.write_atomic(run_dir / layout.LOGS / layout.LINKS_REQUEST, request + "\n", own_dir=True)
    began = time.monotonic()
    deadline = began + timeout
    pending = dict(hosts)
    while pending and time.monotonic() < deadline:
        time.sleep(every)
        for rank, host in list(pending.items()):
            if request in _requests_of(layout.rank_file(run_dir, rank, host, "links")):
                del pending[rank]
    found = read_rank_links(run_dir, hosts, request)
    return TransportGather(found.nodes, found.addr_to_node, found.job_iface, found.errors,
                           round(time.monotonic() - began, 3))


def _requests_of(path: Path) -> list[str]:
    """The requests a .links file answers, from its head (it starts {"req":...,"lreq":...,)."""
    try:
        with safeio.open_regular(path) as f:
            head = f.read(160).decode("utf-8", "replace")
    except OSError:
        return []
    return _REQ.findall(head.partition(',"raw"')[0].partition(',"error"')[0])
