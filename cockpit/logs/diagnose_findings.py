"""Cross-rank findings: the rules that turn many files' events into things to act on, with hints.

Pure. Each rule looks at every (path, event) pair of the job and returns zero or more ``Finding``s; the
job's files are one job (per-rank logs, or one merged log). ``find_all`` runs them all and orders the
result: severity, then ``_PRIORITY`` (causes before consequences), then where the evidence starts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from cockpit.logs.diagnose_advice import KIND_ADVICE
from cockpit.logs.diagnose_model import (
    MAX_EVIDENCE,
    SEVERITIES,
    FileSummary,
    Finding,
    rank_list,
    unit_of,
    world_ranks,
)
from cockpit.logs.parse import Event
from cockpit.logs.parse_kinds import (
    COLLECTIVE_TIMEOUT,
    ELASTIC_ROOT_CAUSE,
    FAILURE_KINDS,
    NCCL_BOOTSTRAP,
    NCCL_CHANNEL,
    NCCL_INIT_COMPLETE,
    NCCL_INIT_START,
    NCCL_NETWORK,
    NCCL_REMOTE_ERROR,
    NCCL_SOCKET_IFNAME,
    NCCL_VERSION,
    PORT_IN_USE,
    SLURM_CANCELLED,
    SLURM_TASK_EXIT,
    SLURM_TIME_LIMIT,
    WORKER_FAILED,
)

Located = tuple[str, Event]

_PRIORITY = {
    "first_failure": 0, "local_interface": 1, "nccl_version_mismatch": 2, PORT_IN_USE: 3, "ib_fallback": 4,
    "init_incomplete": 5, "cuda_oom": 10, "nccl_invalid_usage": 11, "nccl_cuda_error": 12,
    "nccl_system_error": 13, "nccl_internal_error": 14, "network_connect_error": 15, "rendezvous_error": 16,
    "gloo_error": 17, "collective_mismatch": 18, "ddp_unused_parameters": 19, COLLECTIVE_TIMEOUT: 20,
    NCCL_REMOTE_ERROR: 21, SLURM_TIME_LIMIT: 22, SLURM_CANCELLED: 23, SLURM_TASK_EXIT: 24, WORKER_FAILED: 25,
}
_FAILURES = frozenset(FAILURE_KINDS)
# Kinds that report a failure elsewhere rather than cause one: the launcher's and Slurm's reactions.
_REACTIONS = frozenset({WORKER_FAILED, SLURM_TASK_EXIT, SLURM_CANCELLED, SLURM_TIME_LIMIT})
_LOCAL_IFACE = re.compile(r"(?:lo|docker\d*|veth\w*|br-\w+|virbr\d*|cni\d*|podman\d*)$")
_PORT = re.compile(r"[:\s](\d{2,5})\)?[^\n\d]{0,12}?\(?(?:errno:? 98|Address already in use)")


def _evidence(located: Iterable[Located]) -> tuple[tuple[str, int], ...]:
    return tuple(dict.fromkeys((path, e.line) for path, e in located))[:MAX_EVIDENCE]


def _who(events: Iterable[Event]) -> str:
    """'ranks 0-3,7' where ranks are known, else the hosts, else ''."""
    events = list(events)
    ranks = {e.rank for e in events if e.rank is not None}
    if ranks:
        return ("rank " if len(ranks) == 1 else "ranks ") + rank_list(ranks)
    hosts = list(dict.fromkeys(e.host for e in events if e.host))
    if hosts:
        return ("host " if len(hosts) == 1 else "hosts ") + ", ".join(hosts[:4]) + (" …" if len(hosts) > 4 else "")
    return ""


def _one(event: Event) -> str:
    """A single process: 'rank 3 on gpu004', 'gpu004 (pid 12, GPU 3)', or '' where nothing names it."""
    if event.rank is not None:
        return f"rank {event.rank}" + (f" on {event.host}" if event.host else "")
    if event.host:
        extra = ", ".join(x for x in (f"pid {event.pid}" if event.pid else "",
                                     f"GPU {event.cuda_dev}" if event.cuda_dev is not None else "") if x)
        return event.host + (f" ({extra})" if extra else "")
    return ""


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
        _evidence(bad))]


def version_mismatch(located: Sequence[Located]) -> list[Finding]:
    """Different NCCL versions printed by different ranks or files."""
    first: dict[str, Located] = {}
    for path, e in located:
        if e.kind == NCCL_VERSION and e.version:
            first.setdefault(e.version, (path, e))
    if len(first) < 2:
        return []
    parts = [f"{version} ({' in '.join(x for x in (_one(e), path) if x)})" for version, (path, e) in first.items()]
    return [Finding(
        "error", "nccl_version_mismatch", "NCCL versions differ: " + "; ".join(parts),
        "Every rank must load the same NCCL: use one container image / environment on all nodes and check "
        "python -c 'import torch; print(torch.cuda.nccl.version())' on each (LD_LIBRARY_PATH can shadow the "
        "bundled NCCL).",
        _evidence(first.values()))]


def init_incomplete(located: Sequence[Located]) -> list[Finding]:
    """Ranks of the largest communicator that never printed Init COMPLETE."""
    inits = [(p, e) for p, e in located
             if e.kind in (NCCL_INIT_START, NCCL_INIT_COMPLETE) and e.rank is not None and e.nranks]
    if not inits:
        return []
    size = max(e.nranks or 0 for _, e in inits)
    done = {e.rank for _, e in inits if e.kind == NCCL_INIT_COMPLETE and e.nranks == size}
    started = {e.rank: (p, e) for p, e in inits if e.kind == NCCL_INIT_START and e.nranks == size}
    missing = sorted(set(range(size)) - done)
    if not missing:
        return []
    stuck = [r for r in missing if r in started]
    hint = ("A rank that starts NCCL init but never completes is waiting for a peer: look at the missing "
            "ranks' own logs (crashed? wrong MASTER_ADDR? blocked network?); NCCL_DEBUG=INFO on every rank "
            "shows how far each got.")
    if stuck and done:
        title = f"Ranks {rank_list(stuck)} started NCCL init but never reached Init COMPLETE ({size} ranks)"
        return [Finding("error", "init_incomplete", title, hint, _evidence(started[r] for r in stuck))]
    if not done:
        if not started:
            return []
        title = f"NCCL init started on ranks {rank_list(started)} but no rank reached Init COMPLETE"
        return [Finding("warning", "init_incomplete", title, hint, _evidence(started.values()))]
    title = f"Ranks {rank_list(missing)} never printed Init COMPLETE (of {size}; {len(done)} did)"
    evidence = _evidence((p, e) for p, e in inits if e.kind == NCCL_INIT_COMPLETE)
    return [Finding("warning", "init_incomplete", title, hint + " Their logs may also just be missing.",
                    evidence)]


def ib_fallback(located: Sequence[Located]) -> list[Finding]:
    """Some processes use InfiniBand, others fell back to TCP sockets."""
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
    title = (f"InfiniBand on {_who(e for _, e in ib) or 'some processes'}, TCP sockets on "
             f"{_who(e for _, e in socket) or 'others'}")
    return [Finding(
        "error", "ib_fallback", title,
        "The Socket ranks could not open an IB device and fell back to TCP (slow, and it can hang mixed with "
        "IB peers): check that rdma-core / libibverbs is installed in their container, /dev/infiniband is "
        "mounted, NCCL_IB_HCA matches their HCAs (ibstat), and NCCL_IB_DISABLE / NCCL_NET are not set there.",
        _evidence(socket))]


def collective_timeout(located: Sequence[Located], nranks: int | None) -> list[Finding]:
    """Watchdog timeouts: which collective, at which SeqNum, on which ranks, and who lags."""
    timeouts = [(p, e) for p, e in located if e.kind == COLLECTIVE_TIMEOUT]
    if not timeouts:
        return []
    hint = ("A collective waited for a rank that never joined it. The rank with the lowest SeqNum is usually "
            "the one that stalled (an exception, a data-loader hang, rank-dependent control flow): read its "
            "own log first. TORCH_NCCL_TRACE_BUFFER_SIZE=2000 records each rank's last collectives for the "
            "flight recorder; raise the timeout (init_process_group(timeout=)) only if the work is slow.")
    numbered = [(p, e) for p, e in timeouts if e.seq is not None]
    if not numbered:
        who = _who(e for _, e in timeouts)
        return [Finding("error", COLLECTIVE_TIMEOUT, "NCCL watchdog timed out" + (f" on {who}" if who else ""),
                        hint, _evidence(timeouts))]
    groups: dict[tuple[str | None, int], list[Located]] = {}
    for p, e in numbered:
        groups.setdefault((e.op, e.seq or 0), []).append((p, e))
    parts = [f"{op or 'collective'} SeqNum {seq} on {_who(e for _, e in locs) or 'some ranks'}"
             for (op, seq), locs in sorted(groups.items(), key=lambda kv: kv[0][1])]
    title = "Collective timeout: " + "; ".join(parts)
    lowest = min(seq for _, seq in groups)
    laggards = [loc for (_, seq), locs in groups.items() if seq == lowest for loc in locs]
    if len({seq for _, seq in groups}) > 1:
        title += f". Lowest SeqNum {lowest} on {_who(e for _, e in laggards) or 'some ranks'}: the likely laggard"
    reporting = {e.rank for _, e in numbered if e.rank is not None}
    if nranks and reporting and reporting < set(range(nranks)):
        silent = sorted(set(range(nranks)) - reporting)
        title += f"; ranks {rank_list(silent)} of {nranks} reported no timeout"
    return [Finding("error", COLLECTIVE_TIMEOUT, title, hint, _evidence(laggards + numbered))]


def port_in_use(located: Sequence[Located]) -> list[Finding]:
    """The rendezvous / store port is taken."""
    hits = [(p, e) for p, e in located if e.kind == PORT_IN_USE]
    if not hits:
        return []
    port = next((m[1] for _, e in hits for m in [_PORT.search(e.text)] if m), None)
    title = f"Port {port} is already in use" if port else "A port the job needs is already in use"
    return [Finding(
        "error", PORT_IN_USE, title,
        "Another job, or a leftover process of an earlier run, holds the port: pick a free MASTER_PORT "
        "(torchrun --master-port / --rdzv-endpoint) or stop the old process (ss -ltnp | grep PORT).",
        _evidence(hits))]


def first_failure(located: Sequence[Located]) -> list[Finding]:
    """The rank that failed first: torchelastic's root cause, else the earliest timestamped error, else
    the first error in file order."""
    hint = ("Start from this process's own output: errors on the other ranks (remote errors, timeouts, the "
            "launcher's SIGTERMs) are usually consequences of it.")
    roots = [(p, e) for p, e in located if e.kind == ELASTIC_ROOT_CAUSE]
    if roots:
        path, e = roots[0]
        code = f" with exit code {e.exit_code}" if e.exit_code is not None else ""
        return [Finding("error", "first_failure", f"First failure (torchelastic root cause): {_one(e) or 'a worker'} "
                        f"exited{code}", hint, _evidence(roots[:1]))]
    failures = [(p, e) for p, e in located if e.kind in _FAILURES and (e.rank is not None or e.host)]
    ranks = world_ranks(e for _, e in located)
    if len({(p, *unit_of(e, ranks)) for p, e in failures}) < 2:
        return []
    # Timeouts fire on the ranks that waited, microseconds apart: the timeout rule names the laggard.
    causes = [loc for loc in failures if loc[1].kind not in _REACTIONS and loc[1].kind != COLLECTIVE_TIMEOUT]
    if not causes:
        causes = [loc for loc in failures if loc[1].kind in (WORKER_FAILED, SLURM_TASK_EXIT)
                  and loc[1].exit_code not in (None, 0) and loc[1].rank is not None]
    if not causes:
        return []
    timed = [loc for loc in causes if loc[1].ts is not None]
    path, e = min(timed, key=lambda loc: loc[1].ts or 0.0) if timed else causes[0]
    how = "earliest timestamp" if timed else "first in the logs"
    return [Finding("error", "first_failure", f"First failure ({how}): {_one(e)}: {e.kind}", hint,
                    _evidence([(path, e)]))]


def kind_findings(located: Sequence[Located]) -> list[Finding]:
    """One finding per failure kind that no dedicated rule covers."""
    by_kind: dict[str, list[Located]] = {}
    for path, e in located:
        if e.kind in KIND_ADVICE:
            by_kind.setdefault(e.kind, []).append((path, e))
    findings = []
    for kind, locs in by_kind.items():
        severity, title, hint = KIND_ADVICE[kind]
        who = _who(e for _, e in locs)
        findings.append(Finding(severity, kind, title + (f" ({who})" if who else ""), hint, _evidence(locs)))
    return findings


def _nranks(located: Sequence[Located]) -> int | None:
    sizes = [e.nranks for _, e in located if e.nranks]
    return max(sizes) if sizes else None


def _importance(finding: Finding) -> tuple[int, int, tuple[str, int]]:
    start = finding.evidence[0] if finding.evidence else ("", 0)
    return SEVERITIES.index(finding.severity), _PRIORITY.get(finding.code, 50), start


_RULES: tuple[Callable[[Sequence[Located]], list[Finding]], ...] = (
    first_failure, local_interface, version_mismatch, port_in_use, ib_fallback, init_incomplete,
    kind_findings,
)


def find_all(files: Sequence[FileSummary]) -> tuple[Finding, ...]:
    """Every finding for the job whose files these are, most important first."""
    located = [(f.path, e) for f in files for e in f.events]
    findings = [finding for rule in _RULES for finding in rule(located)]
    findings += collective_timeout(located, _nranks(located))
    return tuple(sorted(findings, key=_importance))
