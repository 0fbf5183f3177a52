"""The values `cockpit diagnose` produces: findings, per-rank and per-file summaries, the report.

Pure data, and the small helpers shared by ``engine`` (summaries) and the rules (``rules``,
``nccl``): which process an event belongs to, and how to name processes and evidence in a finding.

A finding whose remedy is a configuration change carries it as data in ``Finding.fix`` (a ``Fix``, else None),
so that `cockpit diagnose --fix/--apply` can offer it without reading the hint's prose. Its shape::

    Fix(env=(("NCCL_IB_GID_INDEX", "3"),),        # variables to set in every rank's environment
        unset=("NCCL_SOCKET_IFNAME",),            # variables to remove from it
        slurm=(("exclude", "gpu004"),),           # sbatch/srun long options without "--" ("mem", "exclude")
        container=(("shm-size", "16g"),),         # container runtime options (docker run --shm-size=16g)
        node_env=None,                            # the host the env change is for, None for every node
        note="...")                               # one line: why, and what a value depends on

Every field is optional (empty / None); a value of ``"?"`` means "the user must choose" (e.g. a memory size
cockpit cannot know). ``Fix.as_dict()`` is the ``--json`` form (``"fix": {...}`` on a finding, or null).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from cockpit.logs.parse.kinds import NCCL_CHANNEL, NCCL_INIT_COMPLETE, NCCL_INIT_START
from cockpit.logs.parse.parser import Event

SEVERITIES = ("error", "warning", "info")
CHOOSE = "?"
"""A ``Fix`` value the user must choose (a size, a node list): cockpit proposes the key, not the value."""


@dataclass(frozen=True)
class Fix:
    """A configuration change that addresses a finding: pure data, applied (or not) by the faces."""

    env: tuple[tuple[str, str], ...] = ()
    """(variable, value) to set in every rank's environment (or ``node_env``'s only), in order."""
    unset: tuple[str, ...] = ()
    """Variables to remove from the ranks' environment."""
    slurm: tuple[tuple[str, str], ...] = ()
    """(sbatch long option without "--", value): ("mem", "?"), ("exclude", "gpu004"), ("requeue", "")."""
    container: tuple[tuple[str, str], ...] = ()
    """(container runtime option without "--", value): ("shm-size", "16g"), ("ipc", "host")."""
    node_env: str | None = None
    """The host ``env`` is meant for; None: every node."""
    note: str = ""
    """One line: why this change, and what a value depends on."""

    def as_dict(self) -> dict[str, object]:
        """The ``--json`` form: ``{"env": {..}, "unset": [..], "slurm": {..}, "container": {..}, "node_env",
        "note"}``."""
        return {"env": dict(self.env), "unset": list(self.unset), "slurm": dict(self.slurm),
                "container": dict(self.container), "node_env": self.node_env, "note": self.note}


Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class Finding:
    """Something to act on, with the lines that show it."""

    severity: Severity
    code: str
    """Stable identifier: a failure kind, or a cross-rank code such as ``local_interface``."""
    title: str
    hint: str
    """What to do about it, concretely."""
    evidence: tuple[tuple[str, int], ...]
    """(path, line) pairs, first occurrence first; at most ``MAX_EVIDENCE``."""
    fix: Fix | None = None
    """The configuration change that addresses it, as data (see the module docstring); None where the remedy
    is in the code or unknown."""


@dataclass(frozen=True)
class RankSummary:
    """What one process's lines say. ``rank`` is None where no line names it (then ``pid`` tells apart)."""

    host: str | None
    rank: int | None
    pid: int | None
    nccl_version: str | None
    networks: tuple[str, ...]
    transports: tuple[str, ...]
    """P2P / SHM / NET / NVLS / COLLNET, plus GDRDMA and CUMEM where a channel used them."""
    interface: str | None
    """The bootstrap interface (or NCCL_SOCKET_IFNAME where no bootstrap line was printed)."""
    init_state: str | None
    """"complete" (an Init COMPLETE line), "started" (Init START only) or None."""
    first_error: Event | None


@dataclass(frozen=True)
class FileSummary:
    """One log file: the facts `cockpit diagnose --json` reports for it."""

    path: str
    nccl_version: str | None
    """The first NCCL version printed in the file, x.y.z."""
    networks: tuple[str, ...]
    """From "Using network X" / "NET/X : Using" lines, first seen first."""
    kinds: tuple[str, ...]
    """Distinct failure kinds, first seen first; empty for a clean log."""
    init_complete_ranks: tuple[int, ...]
    events: tuple[Event, ...]
    """The file's events, repeats past the first ones folded (``fold``): ``folded`` and ``repeats`` count them."""
    ranks: tuple[RankSummary, ...]
    folded: int = 0
    """Occurrences of repeated events read but not kept in ``events`` (0: every event is there)."""
    repeats: tuple[tuple[tuple[int, str], int], ...] = ()
    """((line, kind) of a kept event, how many times that event occurred in the file), for the events that lost
    occurrences to folding."""


REMEDIES = ("code", "configuration", "resources", "hardware", "outside", "unknown")


@dataclass(frozen=True)
class Cause:
    """The root cause that started a job's failure (``cause``): what happened, where, and what kind of
    remedy it needs."""

    words: str
    """Who did what, in words: 'rank 1 raised ValueError: bad batch', 'rank 1 exited (code 0) while ...'."""
    rank: int | None
    host: str | None
    kind: str
    """The event kind that says it, or a run's own: ``early_exit``, ``signal``, ``launcher``."""
    remedy: str
    """One of ``REMEDIES``: ``code`` (no setting fixes it), ``configuration``, ``resources``, ``hardware``,
    ``outside`` (the scheduler, a signal), ``unknown``."""
    evidence: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Report:
    """Everything `cockpit diagnose` prints: files in the order given, findings most important first."""

    files: tuple[FileSummary, ...]
    findings: tuple[Finding, ...]
    cause: Cause | None = None
    """The earliest root cause where one is known (None: none found, or several with no order between them)."""

    @property
    def failed(self) -> bool:
        """Whether the job failed: some finding is an error (what makes `cockpit diagnose` exit 1)."""
        return any(f.severity == "error" for f in self.findings)


MAX_EVIDENCE = 8

Located = tuple[str, Event]
"""An event and the path of the file it is in: what the rules look at."""
Unit = tuple[str, object, object]
"""A process: ("rank", None, rank), ("pid", host, pid) or ("host", host, None)."""
_COMM_KINDS = frozenset({NCCL_INIT_START, NCCL_INIT_COMPLETE, NCCL_CHANNEL})


def world_ranks(events: Iterable[Event]) -> dict[tuple[str | None, int], int]:
    """(host, pid) -> the rank that process has in its largest communicator, from its Init lines."""
    best: dict[tuple[str | None, int], tuple[int, int]] = {}
    for e in events:
        if e.kind in (NCCL_INIT_START, NCCL_INIT_COMPLETE) and e.pid is not None and e.rank is not None:
            key, size = (e.host, e.pid), e.nranks or 0
            if key not in best or size > best[key][0]:
                best[key] = (size, e.rank)
    return {key: rank for key, (_, rank) in best.items()}


def unit_of(event: Event, ranks: dict[tuple[str | None, int], int]) -> Unit:
    """The process an event belongs to. Ranks are unique in a job, so a known rank identifies it whatever
    the host spelling; Init and channel lines print a communicator rank, so they go by pid unless ``ranks``
    (from ``world_ranks``) maps that pid."""
    if event.pid is not None and (event.host, event.pid) in ranks:
        return ("rank", None, ranks[(event.host, event.pid)])
    if event.rank is not None and event.kind not in _COMM_KINDS:
        return ("rank", None, event.rank)
    if event.pid is not None:
        return ("pid", event.host, event.pid)
    if event.rank is not None:
        return ("rank", None, event.rank)
    return ("host", event.host, None)


def rank_list(ranks: Iterable[int]) -> str:
    """Compact rank list: ``0-3,6,7``."""
    ordered = sorted(set(ranks))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if j == i else f"{ordered[i]}-{ordered[j]}" if j > i + 1
                     else f"{ordered[i]},{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def evidence_of(located: Iterable[Located]) -> tuple[tuple[str, int], ...]:
    """The (path, line) pairs of ``located``, each once, first first, at most MAX_EVIDENCE."""
    return tuple(dict.fromkeys((path, e.line) for path, e in located))[:MAX_EVIDENCE]


def who_in(events: Iterable[Event]) -> str:
    """'ranks 0-3,7' where ranks are known, else the hosts, else ''."""
    events = list(events)
    ranks = {e.rank for e in events if e.rank is not None}
    if ranks:
        return ("rank " if len(ranks) == 1 else "ranks ") + rank_list(ranks)
    hosts = list(dict.fromkeys(e.host for e in events if e.host))
    if hosts:
        return ("host " if len(hosts) == 1 else "hosts ") + ", ".join(hosts[:4]) + (" …" if len(hosts) > 4 else "")
    return ""


def one_process(event: Event) -> str:
    """A single process: 'rank 3 on gpu004', 'gpu004 (pid 12, GPU 3)', or '' where nothing names it."""
    if event.rank is not None:
        return f"rank {event.rank}" + (f" on {event.host}" if event.host else "")
    if event.host:
        extra = ", ".join(x for x in (f"pid {event.pid}" if event.pid else "",
                                     f"GPU {event.cuda_dev}" if event.cuda_dev is not None else "") if x)
        return event.host + (f" ({extra})" if extra else "")
    return ""
