"""The nodes' answers to one stacks request -> the run's TransportGather (cockpit.hang.transport). Pure: the
launcher that asked (cockpit.launch.ssh.stacks) passes its nodes, their answers and their scripts' text.

A node with no transport line (unreachable: in a dead-link hang its SSH goes down with its link) is listed as
silent; a record that cannot be read is said in ``errors``, never raised: the stacks still count."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from cockpit.hang.transport import NodeTransport, TransportGather, normal_host
from cockpit.hang.transport_parse import TransportParseError
from cockpit.hang.transport_raw import node_transport, silent

_IFNAME = re.compile(r"\b(GLOO|NCCL)_SOCKET_IFNAME=['\"]?([A-Za-z0-9_.:@,^-]+)")


def job_iface(script: str) -> str | None:
    """The interface a node script pins the job to (its last GLOO_SOCKET_IFNAME, as the shell's last export
    wins, else NCCL_SOCKET_IFNAME's); None when it names none, a list (``eth0,eth1``) or an exclusion (``^docker``)."""
    found = _IFNAME.findall(script)
    gloo = [v for k, v in found if k == "GLOO"] or [v for k, v in found if k == "NCCL"]
    return gloo[-1] if gloo and "," not in gloo[-1] and not gloo[-1].startswith("^") else None


def gather_of(nodes: Sequence[tuple[str, str | None]], answers: Sequence[Sequence[Mapping[str, Any]]],
              scripts: Mapping[str, str] | None = None) -> TransportGather:
    """``nodes``: (host as the rank files name it, its address on the job's subnet or None), in the order of
    ``answers`` (each node's JSON lines); ``scripts``: host -> its node script's text."""
    found: list[NodeTransport] = []
    errors: list[str] = []
    for (host, _address), lines in zip(nodes, answers, strict=True):
        said = [a for a in lines if isinstance(a, Mapping)]
        raws = [a["transport"] for a in said if "transport" in a]
        errors += [f"{host}: {a['transport_error']}" for a in said if "transport_error" in a]
        if not raws:
            found.append(silent(host))
            continue
        try:
            found.append(node_transport(raws[0], host))
        except TransportParseError as exc:
            errors.append(str(exc))
            found.append(silent(host))
    addrs = {normal_host(a): h for h, a in nodes if a}
    ifaces = {h: i for h, text in (scripts or {}).items() if (i := job_iface(text))}
    return TransportGather(tuple(found), addrs, ifaces, tuple(errors))
