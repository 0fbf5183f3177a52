"""Events of many files and ranks -> a per-file, per-rank summary and cross-rank findings with hints.

Pure: the input is already-parsed events per file (``parse.parse_lines``), the output frozen values that
``report`` renders. A finding is something a person should act on, most important first: a cause (the
first rank that failed, a loopback interface on a multi-node job, mismatched NCCL versions, an IB fallback)
before its consequences (timeouts, remote errors, the launcher's SIGTERMs).

Ranks: NCCL's own prefix names a host and pid, not a rank. Where a process also printed an Init line, its
pid is mapped to the rank it has in its largest communicator (the world), and its other events get it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import TypeVar

from cockpit.logs.diagnose.cause import first_cause
from cockpit.logs.diagnose.model import FileSummary, Finding, RankSummary, Report, Unit, unit_of, world_ranks
from cockpit.logs.diagnose.rules import find_all
from cockpit.logs.parse.kinds import (
    FAILURE_KINDS,
    GLOO_ERROR,
    NCCL_BOOTSTRAP,
    NCCL_CHANNEL,
    NCCL_INIT_COMPLETE,
    NCCL_INIT_START,
    NCCL_NETWORK,
    NCCL_REMOTE_ERROR,
    NCCL_SOCKET_IFNAME,
    NCCL_VERSION,
    NCCL_VERSION_MISMATCH,
    NET_PLUGIN_FAILED,
    NET_PLUGIN_FALLBACK,
    PROCESS_DIED,
    PYTHON_EXCEPTION,
    STOP_REQUESTED,
    TEARDOWN_ABORT,
    WORKER_FAILED,
)
from cockpit.logs.parse.parser import Event

T = TypeVar("T")

_FAILURES = frozenset(FAILURE_KINDS)
__all__ = ["FileSummary", "Finding", "RankSummary", "Report", "diagnose", "resolve_ranks", "summarize_file"]

_TRANSPORT_TOKENS = ("P2P", "SHM", "NET", "NVLS", "COLLNET", "GDRDMA", "CUMEM")


def _distinct(values: Iterable[T | None]) -> tuple[T, ...]:
    """Distinct non-None values, first seen first."""
    return tuple(dict.fromkeys(v for v in values if v is not None))


def resolve_ranks(events: Sequence[Event], ranks: dict[tuple[str | None, int], int] | None = None) -> list[Event]:
    """Give events of a known (host, pid) the rank that process has in its largest communicator (``ranks``:
    ``world_ranks(events)`` where the caller has it)."""
    if ranks is None:
        ranks = world_ranks(events)
    if not ranks:
        return list(events)
    out = []
    for e in events:
        rank = ranks.get((e.host, e.pid)) if e.rank is None and e.pid is not None else None
        out.append(dataclasses.replace(e, rank=rank) if rank is not None else e)
    return out


def _transports(events: Iterable[Event]) -> tuple[str, ...]:
    seen: set[str] = set()
    for e in events:
        if e.kind == NCCL_CHANNEL and e.transport:
            seen.update(part.upper() for part in e.transport.split("/"))
    return tuple(t for t in _TRANSPORT_TOKENS if t in seen)


def _rank_summary(unit: Unit, events: list[Event]) -> RankSummary:
    kinds = {e.kind for e in events}
    init = "complete" if NCCL_INIT_COMPLETE in kinds else "started" if NCCL_INIT_START in kinds else None
    bootstrap = next((e.interface for e in events if e.kind == NCCL_BOOTSTRAP), None)
    ifname = next((e.interface for e in events if e.kind == NCCL_SOCKET_IFNAME), None)
    rank = unit[2] if unit[0] == "rank" else None
    return RankSummary(
        host=next((e.host for e in events if e.host is not None), None), rank=rank,  # type: ignore[arg-type]
        pid=next((e.pid for e in events if e.pid is not None), None),
        nccl_version=next((e.version for e in events if e.kind == NCCL_VERSION), None),
        networks=_distinct(e.network for e in events if e.kind in (NCCL_NETWORK, NCCL_CHANNEL)),
        transports=_transports(events), interface=bootstrap or ifname, init_state=init,
        first_error=next((e for e in events if e.kind in _FAILURES), None))


_NO_CRASH = frozenset({TEARDOWN_ABORT, STOP_REQUESTED, WORKER_FAILED})


def in_file_context(events: Sequence[Event]) -> list[Event]:
    """What a file's events say together that no line says alone (the parser keeps no such state, so that
    one file's lines never change another's events): a second NCCL version in the file adds a
    ``nccl_version_mismatch`` event on its line; a libstdc++ abort after the same rank's Python exception or
    failure is that crash's echo, not a teardown abort, and is dropped."""
    out: list[Event] = []
    first_version = None
    crashed: set[int | None] = set()  # ranks (None: unnamed) that failed before
    aborted_at = -10  # the line of the last teardown abort: the shell's "Aborted (core dumped)" after it is its echo
    for e in events:
        if e.kind == TEARDOWN_ABORT and (e.rank in crashed or None in crashed):
            continue
        if e.kind == PROCESS_DIED and "Aborted" in e.text and e.line - aborted_at <= 5:
            continue
        if e.kind == TEARDOWN_ABORT:
            aborted_at = e.line
        out.append(e)
        if e.kind == NCCL_VERSION and e.version:
            if first_version is None:
                first_version = e.version
            elif e.version != first_version:
                out.append(dataclasses.replace(e, kind=NCCL_VERSION_MISMATCH, version=None))
        elif e.kind == PYTHON_EXCEPTION or (e.kind in _FAILURES and e.kind not in _NO_CRASH):
            crashed.add(e.rank)
    return _plugin_fallback(_errno_without_nccl(_throw_named_below(out)))


_THROW = "terminate called after throwing an instance of"


def _throw_named_below(events: list[Event]) -> list[Event]:
    """libstdc++'s "terminate called after throwing an instance of 'X'" is followed by "  what(): ...": where
    that line names a kind (gloo's collective-mismatch check, a CUDA OOM), the throw is that failure, not an
    exception of its own."""
    out = []
    for i, e in enumerate(events):
        after = events[i + 1] if i + 1 < len(events) else None
        if (e.kind == PYTHON_EXCEPTION and _THROW in e.text and after is not None and after.kind in _FAILURES
                and after.line - e.line <= 2):
            continue
        out.append(e)
    return out


def _plugin_fallback(events: list[Event]) -> list[Event]:
    """An OFI/EFA plugin's failure followed by NCCL choosing its sockets is ``net_plugin_fallback``, once per
    file, on the failure's line; a plugin failure after which NCCL used the plugin after all, or anything but
    sockets, is not."""
    failed = next((i for i, e in enumerate(events) if e.kind == NET_PLUGIN_FAILED), None)
    if failed is None:
        return events
    later = [e.network for e in events[failed + 1:] if e.kind in (NCCL_NETWORK, NCCL_CHANNEL) and e.network]
    if not later or later[-1] != "Socket":
        return events
    return [*events[:failed + 1], dataclasses.replace(events[failed], kind=NET_PLUGIN_FALLBACK),
            *events[failed + 1:]]


_ERRNO_ONLY = ("Connection reset by peer", "Broken pipe")  # socket errno text any library prints


def _errno_without_nccl(events: list[Event]) -> list[Event]:
    """A bare socket errno line ("RuntimeError: Connection reset by peer") is an NCCL remote error only in a
    file where NCCL speaks; in a gloo job it is gloo's, and where something else already explains the
    failure (a rendezvous store that went away) it adds nothing."""
    bare = [e for e in events if e.kind == NCCL_REMOTE_ERROR and "ncclRemoteError" not in e.text and
            "remote process" not in e.text and "NCCL" not in e.text and any(w in e.text for w in _ERRNO_ONLY)]
    if not bare or any(e.kind.startswith("nccl_") and e not in bare for e in events):
        return events
    gloo = any(e.kind == GLOO_ERROR or "gloo" in e.text.lower() for e in events)
    others = any(e.kind in _FAILURES and e.kind != NCCL_REMOTE_ERROR for e in events)
    if gloo:
        return [dataclasses.replace(e, kind=GLOO_ERROR) if e in bare else e for e in events]
    return [e for e in events if e not in bare] if others else events


def summarize_file(path: str, events: Sequence[Event]) -> FileSummary:
    """The facts of one file, and one summary per process seen in it."""
    # the same ranks as of the events after both steps: world_ranks reads Init events with a rank, which the
    # file context neither changes, adds nor drops, and an event resolve_ranks gives a rank gets the one its
    # process already has here
    ranks = world_ranks(events)
    events = in_file_context(resolve_ranks(events, ranks))
    units: dict[Unit, list[Event]] = {}
    for e in events:
        if e.host is not None or e.rank is not None or e.pid is not None:
            units.setdefault(unit_of(e, ranks), []).append(e)
    return FileSummary(
        path=path,
        nccl_version=next((e.version for e in events if e.kind == NCCL_VERSION), None),
        networks=_distinct(e.network for e in events if e.kind == NCCL_NETWORK),
        kinds=_distinct(e.kind for e in events if e.kind in _FAILURES),
        init_complete_ranks=tuple(sorted({e.rank for e in events
                                          if e.kind == NCCL_INIT_COMPLETE and e.rank is not None})),
        events=tuple(events),
        ranks=tuple(_rank_summary(unit, evs) for unit, evs in units.items()))


def diagnose(files: Sequence[tuple[str, Sequence[Event]]]) -> Report:
    """Summaries of ``(path, events)`` pairs, in the order given, and their findings, most important first."""
    summaries = tuple(summarize_file(path, events) for path, events in files)
    located = [(f.path, e) for f in summaries for e in f.events]
    cause = first_cause(located)
    return Report(files=summaries, findings=find_all(summaries, located), cause=cause)
