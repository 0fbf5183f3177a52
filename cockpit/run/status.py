"""RunStatus: status.json as a typed value, and its edge to JSON.

Pure and stdlib only. ``from_dict`` checks every field (StatusError says which, and how it is wrong) and
turns the records inside into cockpit.run.records' typed ones; ``to_json`` writes them back, byte for byte
what was read (tests/test_run_records.py holds it to files the earlier, untyped code wrote). Reading and
writing the file itself is cockpit.run.store'.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypedDict

from cockpit.run.attempts import Attempt, attempts_from_list
from cockpit.run.findings import LiveFinding, findings_from_list
from cockpit.run.progress import RankProgress, progress_from_dict
from cockpit.run.records import NUM, FirstFailure, NodeRecord, RankExit, RecordError, Types, is_a, type_name

PRETTY_RANKS = 256  # status.json of a run of more ranks is written on one line (RunStatus.to_json)

# A run's state; "unreadable" is cockpit.run.store.UNREADABLE, what list_runs says of a status.json it cannot
# read (never written). status.json's value is not checked against these: a newer cockpit may write another.
# "unsubmitted": a scheduler's run that never reached it (sbatch refused it, or cockpit was ended while sbatch
# waited): nothing ran, so it is no failure of the job's.
RunState = Literal["starting", "running", "succeeded", "failed", "stopped", "lost", "unsubmitted", "unreadable"]
FinalState = Literal["succeeded", "failed", "stopped", "lost", "unsubmitted"]
FINAL_STATES: tuple[FinalState, ...] = ("succeeded", "failed", "stopped", "lost", "unsubmitted")
STATES: tuple[RunState, ...] = ("starting", "running", *FINAL_STATES)


def final_state(text: str) -> FinalState | None:
    """``text`` as one of FINAL_STATES, None where it is none of them."""
    return next((s for s in FINAL_STATES if s == text), None)


class StatusError(ValueError):
    """status.json exists but is not a run status: not JSON, truncated, or fields of the wrong type."""


class Watch(TypedDict, total=False):
    """status.json's ``watch``, as cockpit.hang.watchdog writes it (read back as stored: only its being an
    object is checked)."""

    phase: str  # "starting" | "running"
    threshold_s: float | None  # seconds of quiet that make a stall now; None: the watch is off
    rule: str  # why that threshold (cockpit.hang.progress.ThresholdRule)
    longest_gap_s: float
    starting: str | None  # where a slow start is
    starting_s: float | None  # for how long it has been starting
    links: dict[str, Any]  # the slow-link watch: its transport gathers so far (cockpit.hang.linkwatch.LinkWatch.said)

@dataclass
class RunStatus:
    """status.json. Mutable on purpose: the supervisor updates it as the run moves on."""

    run_id: str
    name: str
    launcher: str
    job_file: str
    hosts: list[str]
    world_size: int | None
    state: RunState = "starting"
    created: float = field(default_factory=time.time)
    started: float | None = None
    ended: float | None = None
    exit_code: int | None = None
    supervisor: dict[str, object] | None = None  # {"pid": int, "start": str} (start time guards against pid reuse)
    nodes: list[NodeRecord] = field(default_factory=list)  # the units of work, as the launcher describes them
    ranks: dict[str, RankExit] = field(default_factory=dict)  # str(rank) -> how it ended
    first_failure: FirstFailure | None = None
    stop_requested: bool = False
    stopped_at: float | None = None  # wall time the supervisor acted on the stop: later exits are its doing
    note: str | None = None  # why a run ended as it did, when cockpit knows more than the exit code
    # the job's stall_after (cockpit run --stall-after): 0 turns the watch off, None adapts (cockpit.hang.progress)
    stall_after: float | None = None
    on_stall: str = "report"  # "report" | "stop"
    progress: dict[str, RankProgress] = field(default_factory=dict)  # str(rank) -> as the watchdog last saw it
    findings: list[LiveFinding] = field(default_factory=list)  # live findings: stall, stopped, straggler (cockpit.hang)
    # Written only when set (a status.json of an older cockpit reads and writes back as it was):
    start_after: float | None = None  # the job's start budget (None: cockpit.hang.progress.START_AFTER)
    watch: Watch | None = None  # the watchdog's phase and stall threshold now, and where a slow start is
    history: list[LiveFinding] = field(default_factory=list)  # stalls that cleared: when, how long, who, where
    recover: dict[str, object] | None = None  # the job's recover: policy (cockpit.spec.recover.RecoverSpec.to_dict)
    attempts: list[Attempt] = field(default_factory=list)  # with recover: one per start of the ranks
    goodput: float | None = None  # with recover: the share of wall time that trained kept steps (cockpit.run.attempts)
    max_restarts: int | None = None  # the job's max_restarts, where torchrun restarts the workers itself (> 0)
    restarts: list[FirstFailure] = field(default_factory=list)  # each restart torchrun made: the failure it followed
    # the cockpit that hands the run to its scheduler (sbatch): {"pid", "start", "host", "boot"}; until a supervisor
    # runs, the only process that can record what became of the run (cockpit.launch.submitter)
    submitter: dict[str, object] | None = None

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    def to_dict(self) -> dict[str, object]:
        """status.json's object, fields in declaration order (`cockpit ps --json` prints it so)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["nodes"] = [n.to_dict() for n in self.nodes]
        d["ranks"] = {r: e.to_dict() for r, e in self.ranks.items()}
        d["first_failure"] = None if self.first_failure is None else self.first_failure.to_dict()
        d["progress"] = {r: p.to_dict() for r, p in self.progress.items()}
        d["findings"] = [f.to_dict() for f in self.findings]
        d["history"] = [h.to_dict() for h in self.history]
        d["attempts"] = [a.to_dict() for a in self.attempts]
        d["restarts"] = [r.to_dict() for r in self.restarts]
        for name in _WHEN_SET:
            if d[name] is None or d[name] == []:
                del d[name]
        return d

    def to_json(self) -> str:
        """Indented for a person's eye, but one line for a run of more than PRETTY_RANKS ranks: json's indented
        output has no C encoder, and a 4,096-rank status (1.2 MB, rewritten each second) took 50 ms, not 16."""
        big = max(len(self.progress), len(self.ranks), self.world_size or 0) > PRETTY_RANKS
        return json.dumps(self.to_dict(), indent=None if big else 2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> RunStatus:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, data: object, where: str = "") -> RunStatus:
        """A status from status.json's object, checked field by field (StatusError, prefixed with ``where``).
        Fields it does not know are left out."""
        if not isinstance(data, dict):
            raise StatusError(f"{where}expected a JSON object, found {type(data).__name__}")
        for name in _REQUIRED:
            if name not in data:
                raise StatusError(f"{where}{name}: missing")
        for name, types in _FIELD_TYPES.items():  # (type() in types first: is_a's common case, without a call)
            if name in data and type(data[name]) not in types and not is_a(data[name], types):
                names = " or ".join(dict.fromkeys(type_name(t) for t in types))
                raise StatusError(f"{where}{name}: expected {names}, found {json.dumps(data[name])[:40]}")
        if not all(isinstance(h, str) for h in data["hosts"]):
            raise StatusError(f"{where}hosts: expected a list of host names")
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        try:
            known["nodes"] = [NodeRecord.from_dict(n, f"nodes[{i}]: ") for i, n in enumerate(data.get("nodes", ()))]
            known["ranks"] = {r: RankExit.from_dict(e, f"ranks.{r}: ") for r, e in data.get("ranks", {}).items()}
            ff = data.get("first_failure")
            known["first_failure"] = None if ff is None else FirstFailure.from_dict(ff)
            if "progress" in data:
                known["progress"] = progress_from_dict(data["progress"])
            for name in ("findings", "history"):
                if name in data:
                    known[name] = findings_from_list(data[name], name)
            if "attempts" in data:
                known["attempts"] = attempts_from_list(data["attempts"])
            known["restarts"] = _restarts(data.get("restarts", []))
        except RecordError as exc:
            raise StatusError(f"{where}{exc}") from None
        return cls(**known)


def _restarts(items: list[object]) -> list[FirstFailure]:
    """status.json's ``restarts``: each a first_failure-shaped object."""
    out = []
    for i, r in enumerate(items):
        if not isinstance(r, dict):
            raise RecordError(f"restarts[{i}]: expected an object")
        out.append(FirstFailure.from_dict(r, f"restarts[{i}]: "))
    return out


# field -> accepted types (None: may be null). bool is refused where a number is meant (it is an int to Python).
_FIELD_TYPES: dict[str, Types] = {
    "run_id": (str,), "name": (str,), "launcher": (str,), "job_file": (str,), "hosts": (list,),
    "world_size": (int, None), "state": (str,), "created": NUM, "started": (*NUM, None), "ended": (*NUM, None),
    "exit_code": (int, None), "supervisor": (dict, None), "nodes": (list,), "ranks": (dict,),
    "first_failure": (dict, None), "stop_requested": (bool,), "stopped_at": (*NUM, None), "note": (str, None),
    "stall_after": (*NUM, None), "start_after": (*NUM, None), "watch": (dict, None), "history": (list,),
    "recover": (dict, None), "attempts": (list,), "goodput": (*NUM, None),
    "max_restarts": (int, None), "restarts": (list,), "submitter": (dict, None)}
_REQUIRED = ("run_id", "name", "launcher", "job_file", "hosts", "world_size")
_WHEN_SET = ("start_after", "watch", "history", "recover", "attempts", "goodput", "max_restarts", "restarts",
             "submitter")
