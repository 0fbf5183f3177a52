"""status.json's live findings (``findings``) and the stalls that cleared (``history``) as typed values: what
cockpit.hang's watchdog writes, what ps, the summary, the follower, the TUI and the diagnosis read.

Pure and stdlib only, beside RunStatus, which holds them (in cockpit.hang they would make a circle: hang imports
cockpit.run.store). Dicts exist only at the JSON edge: ``from_dict`` checks each field (RecordError names it);
``to_dict`` writes back exactly the keys it was read with (``keys``), sorted as status.json holds them, so a
status.json reads and writes back byte for byte and `cockpit ps --json` prints what it printed. Numbers stay as
read. Each record is read by one table of its JSON keys (``_Spec``): the attribute, the JSON types, and, for a
nested record or a list, how its items are read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from cockpit.run.records import NUM, RecordError, is_a, type_name

Kind = Literal["stall", "stopped", "straggler"]


@dataclass(frozen=True)
class _Spec:
    attr: str
    types: tuple
    item: Any = None  # a record class, or a tuple of JSON types, for each item of a list; a record for an object


class _Record:
    """JSON <-> a frozen record, by the class's SPEC: {JSON key: _Spec}."""

    SPEC: ClassVar[dict[str, _Spec]]
    keys: frozenset[str]

    def to_dict(self) -> dict:
        return {k: _dump(getattr(self, self.SPEC[k].attr)) for k in sorted(self.keys)}

    def with_keys(self, **changes: object) -> Any:
        """A copy with ``changes`` (attribute names), their JSON keys written from now on."""
        added = {k for k, s in self.SPEC.items() if s.attr in changes}
        return replace(self, **changes, keys=self.keys | added)  # type: ignore[type-var]

    @classmethod
    def from_dict(cls, d: object, where: str = "") -> Any:
        if not isinstance(d, dict):
            raise RecordError(f"{where.rstrip(': ')}: expected an object")
        values = {}
        for key, spec in cls.SPEC.items():
            if key in d:
                values[spec.attr] = _load(d[key], spec, f"{where}{key}")
        make: Any = cls  # a dataclass deriving from this class
        return make(**values, keys=frozenset(k for k in d if k in cls.SPEC))


def _dump(value: object) -> object:
    if isinstance(value, _Record):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_dump(v) for v in value]
    return value


def _load(value: object, spec: _Spec, where: str) -> object:
    if not is_a(value, spec.types):
        names = " or ".join(dict.fromkeys(type_name(t) for t in spec.types))
        raise RecordError(f"{where}: expected {names}, found {json.dumps(value)[:40]}")
    if value is None or spec.item is None:
        return value
    if isinstance(value, dict):
        return spec.item.from_dict(value, f"{where}: ")
    assert isinstance(value, list)
    if isinstance(spec.item, tuple):  # plain values
        if not all(is_a(v, spec.item) for v in value):
            raise RecordError(f"{where}: expected a list of {type_name(spec.item[0])}")
        return tuple(value)
    return tuple(spec.item.from_dict(v, f"{where}[{i}]: ") for i, v in enumerate(value))


S, OS, ON, OI = (str,), (str, None), (*NUM, None), (int, None)


@dataclass(frozen=True)
class Worker(_Record):
    """A DataLoader worker of a culprit that waits for its next batch, stuck in the job's code or the kernel."""

    pid: int | None = None
    state: str | None = None  # its process state (D: blocked in the kernel)
    wchan: str | None = None  # the kernel function it waits in
    where: str | None = None  # its frame in the job's code, "getitem (data.py:12)"
    code: str | None = None  # that line of source
    keys: frozenset[str] = frozenset()
    SPEC: ClassVar[dict[str, _Spec]] = {"pid": _Spec("pid", OI), "state": _Spec("state", OS),
                                        "wchan": _Spec("wchan", OS), "where": _Spec("where", OS),
                                        "code": _Spec("code", OS)}


@dataclass(frozen=True)
class RankRef(_Record):
    """One rank of a hang finding: a culprit (stuck, stopped) or a victim (waiting in a collective for it)."""

    rank: int = -1
    host: str = "?"
    state: str = "unknown"  # cockpit.run.progress.RankState
    where: str | None = None  # its frame in the job's code, "load_batch (train.py:41)"
    seq: int | None = None  # the Flight Recorder's last enqueued collective
    last: str | None = None  # the collective it completed last (the rank hook's)
    op: str | None = None  # the collective it waits in
    waiting_s: float | None = None  # how long it has waited in it (a victim)
    loader: bool | None = None  # it waits for its DataLoader's next batch
    workers: tuple[Worker, ...] = ()  # that DataLoader's stuck workers
    idle_workers: tuple[int, ...] = ()  # the pids of its workers that are idle
    keys: frozenset[str] = frozenset()
    SPEC: ClassVar[dict[str, _Spec]] = {
        "rank": _Spec("rank", (int,)), "host": _Spec("host", S), "state": _Spec("state", S),
        "where": _Spec("where", OS), "seq": _Spec("seq", OI), "last": _Spec("last", OS), "op": _Spec("op", OS),
        "waiting_s": _Spec("waiting_s", ON), "loader": _Spec("loader", (bool,)),
        "workers": _Spec("workers", (list,), Worker), "idle_workers": _Spec("idle_workers", (list,), (int,))}


@dataclass(frozen=True)
class Collective(_Record):
    """The collective the victims wait in: the first one a culprit never enqueued (the Flight Recorder's)."""

    seq: int | None = None
    op: str | None = None
    keys: frozenset[str] = frozenset()
    SPEC: ClassVar[dict[str, _Spec]] = {"seq": _Spec("seq", OI), "op": _Spec("op", OS)}


@dataclass(frozen=True)
class Uneven(_Record):
    """Uneven inputs: the ranks still in the training loop's collective, and those that ran out of data first."""

    training: tuple[int, ...] = ()
    training_op: str | None = None
    training_where: str | None = None
    left: tuple[int, ...] = ()
    left_ops: tuple[str, ...] = ()
    left_where: tuple[str, ...] = ()
    keys: frozenset[str] = frozenset()
    SPEC: ClassVar[dict[str, _Spec]] = {
        "training": _Spec("training", (list,), (int,)), "training_op": _Spec("training_op", OS),
        "training_where": _Spec("training_where", OS), "left": _Spec("left", (list,), (int,)),
        "left_ops": _Spec("left_ops", (list,), (str,)), "left_where": _Spec("left_where", (list,), (str,))}


@dataclass(frozen=True)
class LiveFinding(_Record):
    """One live finding of cockpit.hang (a stall, a stopped rank, a straggler), or a stall that cleared (in
    ``history``: severity "warning", ``cleared`` and ``lasted_s`` set). A straggler has ``rank`` and its
    numbers; a hang has culprits, victims and where they wait."""

    kind: str = "stall"  # Kind; read as written
    severity: str = "error"  # "error" | "warning"
    text: str = ""
    hint: str = ""
    next: str | None = None  # the command to run next
    # a hang (stall, stopped)
    phase: str | None = None  # "start": a start that used up its budget; "running"
    quiet_s: float | None = None
    culprits: tuple[RankRef, ...] = ()
    victims: tuple[RankRef, ...] = ()
    silent: tuple[int, ...] = ()  # ranks that gave no stack
    collective: Collective | None = None
    mismatch: bool | None = None  # every rank waits, in different collectives
    uneven: Uneven | None = None
    hooked: bool | None = None  # some rank runs cockpit's hook
    began: float | None = None  # the last progress (a stall) or when the rank stopped
    found: float | None = None  # when the finding was made, after the stacks came
    threshold_s: float | None = None
    rule: str | None = None  # cockpit.hang.progress.ThresholdRule
    stacks: str | None = None  # the stacks file written for it
    link: dict | None = None  # the link finding and its connection table (cockpit.hang.linkwords.link_dict's JSON)
    connections: dict | None = None  # every rank connection gathered (cockpit.hang.linkwords.connections' JSON)
    cleared: float | None = None  # history: when the ranks moved again
    lasted_s: float | None = None
    # a straggler
    rank: int | None = None
    host: str | None = None
    compute_ms: float | None = None
    others_wait_ms: float | None = None
    wait_share: float | None = None
    others_share: float | None = None
    keys: frozenset[str] = field(default=frozenset())
    SPEC: ClassVar[dict[str, _Spec]] = {
        "kind": _Spec("kind", S), "severity": _Spec("severity", S), "text": _Spec("text", S),
        "hint": _Spec("hint", S), "next": _Spec("next", OS), "phase": _Spec("phase", OS),
        "quiet_s": _Spec("quiet_s", ON), "culprits": _Spec("culprits", (list,), RankRef),
        "victims": _Spec("victims", (list,), RankRef), "silent": _Spec("silent", (list,), (int,)),
        "collective": _Spec("collective", (dict, None), Collective), "mismatch": _Spec("mismatch", (bool,)),
        "uneven": _Spec("uneven", (dict, None), Uneven), "hooked": _Spec("hooked", (bool,)),
        "began": _Spec("began", ON), "found": _Spec("found", ON), "threshold_s": _Spec("threshold_s", ON),
        "rule": _Spec("rule", OS), "stacks": _Spec("stacks", OS), "link": _Spec("link", (dict, None)),
        "connections": _Spec("connections", (dict, None)),
        "cleared": _Spec("cleared", ON),
        "lasted_s": _Spec("lasted_s", ON), "rank": _Spec("rank", OI), "host": _Spec("host", OS),
        "compute_ms": _Spec("compute_ms", ON), "others_wait_ms": _Spec("others_wait_ms", ON),
        "wait_share": _Spec("wait_share", ON), "others_share": _Spec("others_share", ON)}

    @property
    def culprit_rank(self) -> int | None:
        """The rank its evidence is about: the first culprit's, a straggler's."""
        return self.culprits[0].rank if self.culprits else self.rank


def findings_from_list(items: object, where: str) -> list[LiveFinding]:
    """status.json's ``findings`` or ``history`` list."""
    if not isinstance(items, list):
        raise RecordError(f"{where}: expected a list")
    return [LiveFinding.from_dict(f, f"{where}[{i}]: ") for i, f in enumerate(items)]
