"""The NCCL rules of `cockpit diagnose`: what NCCL's own INFO lines say about the job as a whole. A local
interface (loopback, a container bridge) on a job across hosts, NCCL versions that differ between ranks,
ranks that never completed NCCL init, InfiniBand on some processes and TCP sockets on others.

Pure; each rule takes every (path, event) pair of the job and returns zero or more ``Finding``s, like the
rules in ``rules``, which runs these with its own and orders the result.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cockpit.logs.diagnose.model import (
    Finding,
    Fix,
    Located,
    evidence_of,
    one_process,
    rank_list,
    unit_of,
    who_in,
    world_ranks,
)
from cockpit.logs.parse.kinds import (
    NCCL_BOOTSTRAP,
    NCCL_CHANNEL,
    NCCL_INIT_COMPLETE,
    NCCL_INIT_START,
    NCCL_NETWORK,
    NCCL_SOCKET_IFNAME,
    NCCL_VERSION,
    NCCL_VERSION_MISMATCH,
)

_LOCAL_IFACE = re.compile(r"(?:lo|docker\d*|veth\w*|br-\w+|virbr\d*|cni\d*|podman\d*)$")


def _is_local(name: str) -> bool:
    return bool(_LOCAL_IFACE.match(name))


def local_interface(located: Sequence[Located]) -> list[Finding]:
    """NCCL_SOCKET_IFNAME or the chosen interface is loopback / a container bridge on a multi-host job."""
    hosts = {e.host for _, e in located if e.host}
    addresses = {e.address for _, e in located if e.kind == NCCL_BOOTSTRAP and e.address}
    n_hosts = max(len(hosts), len(addresses - {"127.0.0.1", "::1"}))
    if n_hosts < 2:
        return []
    bad: list[Located] = []
    names: dict[str, None] = {}
    for path, e in located:
        if e.kind == NCCL_SOCKET_IFNAME and e.interface and not e.interface.startswith("^"):
            chosen = [n.lstrip("=") for n in e.interface.split(",")]
        elif e.kind in (NCCL_BOOTSTRAP, NCCL_NETWORK) and e.interfaces:
            chosen = list(e.interfaces)
        else:
            continue
        local = [n for n in chosen if _is_local(n)]
        if local:
            bad.append((path, e))
            names.update(dict.fromkeys(local))
    if not bad:
        return []
    listed = ", ".join(names)
    return [Finding(
        "error", "local_interface", f"NCCL uses {listed} on a job that spans {n_hosts} hosts",
        "Loopback and container-bridge interfaces do not reach other nodes. Set NCCL_SOCKET_IFNAME to an "
        "interface every node shares (e.g. eth0, ib0, bond0) or exclude the local ones with "
        "NCCL_SOCKET_IFNAME=^lo,docker0 (GLOO_SOCKET_IFNAME likewise for gloo).",
        evidence_of(bad), Fix(env=(("NCCL_SOCKET_IFNAME", "^lo,docker0"), ("GLOO_SOCKET_IFNAME", "?")),
                              note="GLOO_SOCKET_IFNAME: an interface every node shares (ip -br a)"))]


def version_mismatch(located: Sequence[Located]) -> list[Finding]:
    """Different NCCL versions printed by different ranks or files."""
    first: dict[str, Located] = {}
    for path, e in located:
        if e.kind == NCCL_VERSION and e.version:
            first.setdefault(e.version, (path, e))
    said = [(p, e) for p, e in located if e.kind == NCCL_VERSION_MISMATCH]
    if len(first) < 2 and not said:
        return []
    if len(first) < 2:  # NCCL's own "Mismatched NCCL version detected" / "version mismatch with remote peer"
        return [Finding("error", "nccl_version_mismatch", "NCCL reports peers with another NCCL version",
                        _VERSION_HINT, evidence_of(said))]
    parts = [f"{version} ({' in '.join(x for x in (one_process(e), path) if x)})"
             for version, (path, e) in first.items()]
    return [Finding(
        "error", "nccl_version_mismatch", "NCCL versions differ: " + "; ".join(parts), _VERSION_HINT,
        evidence_of(first.values()))]


_VERSION_HINT = ("Every rank must load the same NCCL: use one container image / environment on all nodes and "
                 "check python -c 'import torch; print(torch.cuda.nccl.version())' on each (LD_LIBRARY_PATH can "
                 "shadow the bundled NCCL).")


def init_incomplete(located: Sequence[Located]) -> list[Finding]:
    """Ranks of the largest communicator that never printed Init COMPLETE."""
    inits = [(p, e) for p, e in located
             if e.kind in (NCCL_INIT_START, NCCL_INIT_COMPLETE) and e.rank is not None and e.nranks]
    if not inits:
        return []
    size = max(e.nranks or 0 for _, e in inits)
    done = {e.rank for _, e in inits if e.kind == NCCL_INIT_COMPLETE and e.nranks == size}
    started = {r: (p, e) for p, e in inits
               if e.kind == NCCL_INIT_START and e.nranks == size and (r := e.rank) is not None}  # all: see inits
    missing = sorted(set(range(size)) - done)
    if not missing:
        return []
    stuck = [r for r in missing if r in started]
    hint = ("A rank that starts NCCL init but never completes is waiting for a peer: look at the missing "
            "ranks' own logs (crashed? wrong MASTER_ADDR? blocked network?); NCCL_DEBUG=INFO on every rank "
            "shows how far each got.")
    if stuck and done:
        title = f"Ranks {rank_list(stuck)} started NCCL init but never reached Init COMPLETE ({size} ranks)"
        return [Finding("error", "init_incomplete", title, hint, evidence_of(started[r] for r in stuck))]
    if not done:
        if not started:
            return []
        title = f"NCCL init started on ranks {rank_list(started)} but no rank reached Init COMPLETE"
        return [Finding("warning", "init_incomplete", title, hint, evidence_of(started.values()))]
    title = f"Ranks {rank_list(missing)} never printed Init COMPLETE (of {size}; {len(done)} did)"
    evidence = evidence_of((p, e) for p, e in inits if e.kind == NCCL_INIT_COMPLETE)
    return [Finding("warning", "init_incomplete", title, hint + " Their logs may also just be missing.",
                    evidence)]


def ib_fallback(located: Sequence[Located]) -> list[Finding]:
    """Some processes use InfiniBand, others fell back to TCP sockets."""
    if len({e.network for _, e in located if e.network in ("IB", "Socket")}) < 2:
        return []  # what each process ended on is the one network named: nothing to find, no pass for the ranks
    chosen: dict[tuple[object, ...], tuple[str, Located]] = {}
    channel: dict[tuple[object, ...], tuple[str, Located]] = {}
    ranks = world_ranks(e for _, e in located)
    for path, e in located:
        if e.network not in ("IB", "Socket"):
            continue
        key = (path, *unit_of(e, ranks))
        if e.kind == NCCL_NETWORK:
            chosen[key] = (e.network, (path, e))  # NCCL prints "Using network X" last: the last one wins
        elif e.kind == NCCL_CHANNEL and (key not in channel or e.network == "IB"):
            channel[key] = (e.network, (path, e))
    final = {**channel, **chosen}
    socket = [loc for net, loc in final.values() if net == "Socket"]
    ib = [loc for net, loc in final.values() if net == "IB"]
    if not socket or not ib:
        return []
    title = (f"InfiniBand on {who_in(e for _, e in ib) or 'some processes'}, TCP sockets on "
             f"{who_in(e for _, e in socket) or 'others'}")
    return [Finding(
        "error", "ib_fallback", title,
        "The Socket ranks could not open an IB device and fell back to TCP (slow, and it can hang mixed with "
        "IB peers): check that rdma-core / libibverbs is installed in their container, /dev/infiniband is "
        "mounted, NCCL_IB_HCA matches their HCAs (ibstat), and NCCL_IB_DISABLE / NCCL_NET are not set there.",
        evidence_of(socket))]
