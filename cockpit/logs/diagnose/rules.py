"""Cross-rank findings: the rules that turn many files' events into things to act on, with hints.

Pure. Each rule looks at every (path, event) pair of the job and returns zero or more ``Finding``s; the
job's files are one job (per-rank logs, or one merged log). Here: collective timeouts, a port in use, and one
finding per other failure kind (a gloo error that only lost its peer apart: a consequence, no fix); the first
failure and a process's end in words are in ``first``, NCCL's own rules in ``nccl``. ``find_all``
runs them all and orders the result: severity, then ``_PRIORITY`` (causes before consequences), then where
the evidence starts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from cockpit.logs.diagnose.advice import EXCLUDE_KINDS, GID_FIX, GLOO_PEER_LOST, KIND_ADVICE, KIND_FIX
from cockpit.logs.diagnose.cause import lost_peer
from cockpit.logs.diagnose.first import first_failure, launch_failed, process_died, uncaught_exception
from cockpit.logs.diagnose.model import (
    CHOOSE,
    SEVERITIES,
    FileSummary,
    Finding,
    Fix,
    Located,
    evidence_of,
    rank_list,
    who_in,
)
from cockpit.logs.diagnose.nccl import ib_fallback, init_incomplete, local_interface, version_mismatch
from cockpit.logs.parse.kinds import (
    COLLECTIVE_TIMEOUT,
    GLOO_ERROR,
    IB_ERROR,
    NCCL_INIT_COMPLETE,
    NCCL_INIT_START,
    NCCL_REMOTE_ERROR,
    PORT_IN_USE,
    SLURM_CANCELLED,
    SLURM_TASK_EXIT,
    SLURM_TIME_LIMIT,
    STOP_REQUESTED,
    TEARDOWN_ABORT,
    WORKER_FAILED,
)

_PRIORITY = {
    "first_failure": 0, "local_interface": 1, "nccl_version_mismatch": 2, PORT_IN_USE: 3, "ib_fallback": 4,
    "init_incomplete": 5, "cuda_oom": 10, "nccl_invalid_usage": 11, "nccl_cuda_error": 12,
    "nccl_system_error": 13, "nccl_internal_error": 14, "network_connect_error": 15, "rendezvous_error": 16,
    "gloo_error": 17, "collective_mismatch": 18, "ddp_unused_parameters": 19, COLLECTIVE_TIMEOUT: 20,
    NCCL_REMOTE_ERROR: 21, SLURM_TIME_LIMIT: 22, SLURM_CANCELLED: 23, SLURM_TASK_EXIT: 24, WORKER_FAILED: 25,
    # diagnose-2: the host and the fabric are causes; a stop and a teardown abort explain the rest.
    "gpu_ecc": 6, "gpu_xid": 7, "slurm_node_fail": 8, "slurm_oom_kill": 9, "shm_exhausted": 10,
    IB_ERROR: 14, "slurm_preempted": 22, STOP_REQUESTED: 26, TEARDOWN_ABORT: 27,
    # trust: the new kinds; an exception is a cause, a store read that timed out a consequence.
    "uncaught_exception": 9, "process_died": 9, "launch_failed": 9, "gpu_lost": 7, "host_oom": 9,
    "net_plugin_fallback": 4, "store_timeout": 20,
    # habits: a GPU script on a CPU run, a cause (every rank raises it on its own)
    "no_gpu": 9,
}
_PORT = re.compile(r"[:\s](\d{2,5})\)?[^\n\d]{0,12}?\(?(?:errno:? 98|Address already in use)")


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
        who = who_in(e for _, e in timeouts)
        return [Finding("error", COLLECTIVE_TIMEOUT, "NCCL watchdog timed out" + (f" on {who}" if who else ""),
                        hint, evidence_of(timeouts))]
    groups: dict[tuple[str | None, int], list[Located]] = {}
    for p, e in numbered:
        groups.setdefault((e.op, e.seq or 0), []).append((p, e))
    parts = [f"{op or 'collective'} SeqNum {seq} on {who_in(e for _, e in locs) or 'some ranks'}"
             for (op, seq), locs in sorted(groups.items(), key=lambda kv: kv[0][1])]
    title = "Collective timeout: " + "; ".join(parts)
    lowest = min(seq for _, seq in groups)
    laggards = [loc for (_, seq), locs in groups.items() if seq == lowest for loc in locs]
    if len({seq for _, seq in groups}) > 1:
        title += f". Lowest SeqNum {lowest} on {who_in(e for _, e in laggards) or 'some ranks'}: the likely laggard"
    reporting = {e.rank for _, e in numbered if e.rank is not None}
    if nranks and reporting and reporting < set(range(nranks)):
        silent = sorted(set(range(nranks)) - reporting)
        title += f"; ranks {rank_list(silent)} of {nranks} reported no timeout"
    return [Finding("error", COLLECTIVE_TIMEOUT, title, hint, evidence_of(laggards + numbered))]


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
        evidence_of(hits), Fix(env=(("MASTER_PORT", CHOOSE),), note="a free port on the rank-0 node"))]


_NODE_NAMED = re.compile(r"\bON (\S+) CANCELLED|Node failure on (\S+)|^\w{3} +\d+ [\d:]+ (\S+) kernel:")


def _hosts(locs: Sequence[Located]) -> list[str]:
    hosts = []
    for _, e in locs:
        m = _NODE_NAMED.search(e.text)
        host = e.host or (next(g for g in m.groups() if g) if m else None)
        if host and host not in hosts:
            hosts.append(host)
    return hosts


def _fix_for(kind: str, locs: Sequence[Located]) -> Fix | None:
    """The configuration change for a kind's finding: a GID index where the IB lines name GIDs or a QP
    transition (RoCE's usual GID problem), ``--exclude`` of the named hosts for a broken node."""
    if kind == IB_ERROR and any("GID" in e.text or "ibv_modify_qp" in e.text for _, e in locs):
        return GID_FIX
    if kind in EXCLUDE_KINDS:
        hosts = _hosts(locs)
        return Fix(slurm=(("exclude", ",".join(hosts) or CHOOSE),),
                   note="leave the node out and report it to the admins" if hosts else "the node the lines name")
    return KIND_FIX.get(kind)


def kind_findings(located: Sequence[Located]) -> list[Finding]:
    """One finding per failure kind that no dedicated rule covers. gloo errors that only say a peer went away
    are a consequence: a finding of their own, with no fix (no setting of this rank brings its peer back)."""
    by_kind: dict[str, list[Located]] = {}
    for path, e in located:
        if e.kind in KIND_ADVICE:
            kind = GLOO_PEER_LOST if e.kind == GLOO_ERROR and lost_peer(e.text) else e.kind
            by_kind.setdefault(kind, []).append((path, e))
    findings = []
    for kind, locs in by_kind.items():
        severity, title, hint = KIND_ADVICE[kind]
        who = who_in(e for _, e in locs)
        code = GLOO_ERROR if kind == GLOO_PEER_LOST else kind
        findings.append(Finding(severity, code, title + (f" ({who})" if who else ""), hint, evidence_of(locs),
                                _fix_for(kind, locs)))
    return findings


def _nranks(located: Sequence[Located]) -> int | None:
    sizes = [e.nranks for _, e in located if e.nranks]
    return max(sizes) if sizes else None


def _importance(finding: Finding) -> tuple[int, int, tuple[str, int]]:
    start = finding.evidence[0] if finding.evidence else ("", 0)
    return SEVERITIES.index(finding.severity), _PRIORITY.get(finding.code, 50), start


_RULES: tuple[Callable[[Sequence[Located]], list[Finding]], ...] = (
    first_failure, local_interface, version_mismatch, port_in_use, ib_fallback, init_incomplete,
    kind_findings, uncaught_exception, process_died, launch_failed,
)


_READ_ALL = frozenset({first_failure, local_interface, ib_fallback, init_incomplete})
"""The rules that read events of every kind (processes' ranks from their Init lines, hosts, networks); the
others look only at kinds of their own, which no Init START/COMPLETE line is."""
_COMM_INIT = frozenset({NCCL_INIT_START, NCCL_INIT_COMPLETE})


def find_all(files: Sequence[FileSummary], located: Sequence[Located] | None = None) -> tuple[Finding, ...]:
    """Every finding for the job whose files these are, most important first (an uncaught exception's finding
    only where no first-failure finding names the failure already). ``located``: the files' (path, event)
    pairs, where the caller has them.

    A long job's Init START/COMPLETE lines are most of its events (a pair per communicator and rank, each
    kept: its address differs), so the rules that do not read them get the other events only."""
    if located is None:
        located = [(f.path, e) for f in files for e in f.events]
    others = [loc for loc in located if loc[1].kind not in _COMM_INIT]
    findings = [finding for rule in _RULES for finding in rule(located if rule in _READ_ALL else others)]
    findings += collective_timeout(others, _nranks(located))
    if any(f.code == "first_failure" for f in findings):
        findings = [f for f in findings if f.code != "uncaught_exception"]
    return tuple(sorted(findings, key=_importance))
