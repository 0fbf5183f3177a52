"""The typed records inside status.json: how a rank ended (RankExit), the run's first failure (FirstFailure),
and each unit of work the supervisor launched (NodeRecord: a local torchrun, an ssh node, a Slurm job, a
sweep's trial).

Pure and stdlib only: the supervisor and the rank-facing code import it. Dicts exist only at the
status.json edge (cockpit.run.status): ``from_dict`` checks a record field by field and RecordError names
the field; ``to_dict`` writes back exactly the keys it was read with, so a status.json reads and writes back
byte for byte. JSON tells a value not known yet (``"pid": null``) from a field a launcher does not have (no
``pid`` key), and status.json holds both: ``NodeRecord.null_keys`` keeps the two apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

NUM = (int, float)  # JSON does not tell 1 from 1.0
# what ``get`` checks against: Python types, None for null
Types = tuple[type | None, ...]
# a status.json object as json.loads gives it (its values are checked field by field, then typed by the record)
JsonObject = Mapping[str, Any]


class RecordError(ValueError):
    """A status.json record of the wrong shape; the message names the field ("nodes[1]: host: ...")."""


def is_a(value: object, types: Types) -> bool:
    """``value`` has one of ``types`` (None in ``types``: may be null). bool is refused where a number is
    meant (it is an int to Python)."""
    if type(value) in types:  # the common case, at once (a bool's type is bool: in types only where meant)
        return True
    if value is None:
        return None in types
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, tuple(t for t in types if t is not None))


def type_name(t: type | None) -> str:
    names: dict[type | None, str] = {None: "null", str: "a string", int: "a number", float: "a number", list: "a list",
                                     dict: "an object", bool: "true/false"}
    return names[t]


def get(d: JsonObject, key: str, types: Types, where: str, required: bool = False) -> Any:
    """``d[key]`` checked against ``types``; None when absent (RecordError when ``required``). Any: the value
    is of one of ``types``, which the caller's field names."""
    if key not in d:
        if required:
            raise RecordError(f"{where}{key}: missing")
        return None
    value = d[key]
    if not is_a(value, types):
        names = " or ".join(dict.fromkeys(type_name(t) for t in types))
        raise RecordError(f"{where}{key}: expected {names}, found {json.dumps(value)[:40]}")
    return value


def get_list(d: JsonObject, key: str, item_types: Types, where: str) -> tuple[Any, ...] | None:
    items = get(d, key, (list, None), where)
    if items is not None and not all(is_a(i, item_types) for i in items):
        names = " or ".join(dict.fromkeys(type_name(t) for t in item_types))
        raise RecordError(f"{where}{key}: expected a list of {names}")
    return None if items is None else tuple(items)


def _signal(status: int) -> int | None:
    return status - 128 if status > 128 else None  # shell convention: 128+N means signal N


@dataclass(frozen=True)
class RankExit:
    """How one rank ended, as its wrapper recorded it; status.json's ``ranks`` entry."""

    rank: int
    host: str
    status: int  # the shell's exit status: 128+N means killed by signal N
    time: float  # wall time of the end
    teardown_abort: bool = False  # finished its work, then aborted at interpreter exit (cockpit.logs.diagnose.teardown)

    @property
    def signal(self) -> int | None:
        return _signal(self.status)

    def describe(self) -> str:
        import signal as _signal_module

        if self.signal is None:
            return f"exit code {self.status}"
        try:
            name = _signal_module.Signals(self.signal).name
        except ValueError:
            name = f"signal {self.signal}"
        return f"killed by {name} (status {self.status})"

    def to_dict(self) -> dict[str, object]:
        d = {"host": self.host, "rank": self.rank, "signal": self.signal, "status": self.status, "time": self.time}
        return dict(sorted({**d, "teardown_abort": True}.items())) if self.teardown_abort else d

    @classmethod
    def from_dict(cls, d: object, where: str = "") -> RankExit:
        if not isinstance(d, dict):
            raise RecordError(f"{where.rstrip(': ')}: expected an object")
        return cls(get(d, "rank", (int,), where, True), get(d, "host", (str,), where, True),
                   get(d, "status", (int,), where, True), get(d, "time", NUM, where, True),
                   bool(get(d, "teardown_abort", (bool,), where)))


@dataclass(frozen=True)
class FirstFailure:
    """The run's first failure: the earliest failing rank, or (ssh) a node's torchrun that ended before any
    rank failed (``agent``, rank None); status.json's ``first_failure``."""

    rank: int | None
    host: str
    status: int
    time: float
    description: str  # status.json's "describe": what to call it, e.g. "killed by SIGKILL (status 137)"
    teardown_abort: bool = False
    agent: bool = False  # a node's torchrun, not a rank (ssh)
    node_rank: int | None = None  # the agent's node

    @property
    def signal(self) -> int | None:
        return _signal(self.status)

    @classmethod
    def of(cls, e: RankExit, description: str) -> FirstFailure:
        return cls(e.rank, e.host, e.status, e.time, description, e.teardown_abort)

    def to_dict(self) -> dict[str, object]:
        d = {"describe": self.description, "host": self.host, "rank": self.rank, "signal": self.signal,
             "status": self.status, "time": self.time}
        if self.teardown_abort:
            d["teardown_abort"] = True
        if self.agent:
            d["agent"] = True
        if self.node_rank is not None:
            d["node_rank"] = self.node_rank
        return dict(sorted(d.items()))

    @classmethod
    def from_dict(cls, d: JsonObject, where: str = "first_failure: ") -> FirstFailure:
        return cls(get(d, "rank", (int, None), where, True), get(d, "host", (str,), where, True),
                   get(d, "status", (int,), where, True), get(d, "time", NUM, where, True),
                   get(d, "describe", (str,), where, True), bool(get(d, "teardown_abort", (bool,), where)),
                   bool(get(d, "agent", (bool,), where)), get(d, "node_rank", (int, None), where))


@dataclass(frozen=True)
class Trial:
    """A sweep's trial: its place in the grid and (local sweeps) its GPUs and slot."""

    index: int  # status.json's "trial"
    args: tuple[str, ...]  # added to the job's args
    gpus: tuple[int, ...] | None = None  # local: the trial's GPU set (empty on CPU); Slurm: None
    slot: int | None = None  # local: trials of one slot run one after another

    def items(self) -> dict[str, object]:
        return {"trial": self.index, "args": list(self.args), "gpus": None if self.gpus is None else list(self.gpus),
                "slot": self.slot}

    @classmethod
    def from_dict(cls, d: JsonObject, where: str) -> Trial:
        return cls(get(d, "trial", (int,), where, True), get_list(d, "args", (str,), where) or (),
                   get_list(d, "gpus", (int,), where), get(d, "slot", (int, None), where))


@dataclass(frozen=True)
class SlurmJob:
    """A Slurm job or array task, as sbatch named it and Slurm last reported it (cockpit.slurm.query.JobView)."""

    job_id: str | None  # None until sbatch answered; "123", or "123_4" for an array task
    array_job_id: str | None = None
    slurm_state: str | None = None
    reason: str | None = None
    nodes: str | None = None  # the allocation, as a hostlist
    source: str | None = None  # squeue | sacct | jobcomp
    restarts: int | None = None
    resumed_steps: tuple[int | None, ...] | None = None  # per restart: the checkpoint step it resumed from
    # slurm.exclude_bad_nodes: the jobs submitted before this one, whose preflight found a bad node, and the
    # nodes this one was submitted without (--exclude)
    earlier_jobs: tuple[str, ...] | None = None
    excluded: tuple[str, ...] | None = None

    def items(self) -> dict[str, object]:
        steps = None if self.resumed_steps is None else list(self.resumed_steps)
        return {"job_id": self.job_id, "array_job_id": self.array_job_id, "slurm_state": self.slurm_state,
                "reason": self.reason, "nodes": self.nodes, "source": self.source, "restarts": self.restarts,
                "resumed_steps": steps, "earlier_jobs": _listed(self.earlier_jobs), "excluded": _listed(self.excluded)}

    @classmethod
    def from_dict(cls, d: JsonObject, where: str) -> SlurmJob:
        s = (str, None)
        return cls(get(d, "job_id", s, where), get(d, "array_job_id", s, where), get(d, "slurm_state", s, where),
                   get(d, "reason", s, where), get(d, "nodes", s, where), get(d, "source", s, where),
                   get(d, "restarts", (int, None), where), get_list(d, "resumed_steps", (int, None), where),
                   get_list(d, "earlier_jobs", (str,), where), get_list(d, "excluded", (str,), where))


def _listed(values: tuple[str, ...] | None) -> list[str] | None:
    return None if values is None else list(values)


@dataclass(frozen=True)
class SshProcess:
    """An ssh node's launch shell: what tells it from a later process with the same pid, and the teardown."""

    shared: bool  # the node sees this machine's run directory itself
    start: str | None = None  # the process's start time (/proc ticks): guards against pid reuse
    stopped: str | None = None  # what cockpit's teardown found there

    def items(self) -> dict[str, object]:
        return {"shared": self.shared, "start": self.start, "stopped": self.stopped}

    @classmethod
    def from_dict(cls, d: JsonObject, where: str) -> SshProcess:
        return cls(get(d, "shared", (bool,), where, True), get(d, "start", (str, None), where),
                   get(d, "stopped", (str, None), where))


# Which keys a writer puts in status.json even while their value is unknown (null); see NodeRecord.null_keys.
PROCESS_KEYS = frozenset({"pid", "exit_code"})  # a process the supervisor polls
SLURM_VIEW_KEYS = frozenset({"slurm_state", "reason", "state", "nodes", "source", "exit_code"})  # Slurm's view
SSH_KEYS = frozenset({"pid", "start", "exit_code", "state", "run_dir", "note", "stopped"})  # an ssh node


@dataclass(frozen=True)
class NodeRecord:
    """One unit of work of a run as status.json's ``nodes`` has it: a local torchrun, an ssh node, a Slurm
    job, or a sweep's trial (``trial`` set; local or Slurm). Written by the launchers' ``describe()``."""

    host: str  # where it runs; "sbatch" or "trial-<i>" name the logs/agent.<host>.log of a job or trial
    node_rank: int
    pid: int | None = None  # its launch process (local torchrun, ssh launch shell, a trial's bash)
    exit_code: int | None = None  # None while it runs
    state: str | None = None  # a trial's or ssh node's own state; a Slurm job's state as cockpit maps it
    run_dir: str | None = None  # a trial's run directory; an ssh node's run directory as the node sees it
    note: str | None = None  # ssh: why it ended, or why it cannot be followed
    trial: Trial | None = None
    slurm: SlurmJob | None = None
    ssh: SshProcess | None = None
    null_keys: frozenset[str] = frozenset()  # keys written as null while their value is None (module doc)

    def to_dict(self) -> dict[str, object]:
        items = {"host": self.host, "node_rank": self.node_rank, "pid": self.pid, "exit_code": self.exit_code,
                 "state": self.state, "run_dir": self.run_dir, "note": self.note}
        for part in (self.trial, self.slurm, self.ssh):
            if part is not None:
                items.update(part.items())
        return {k: v for k, v in sorted(items.items()) if v is not None or k in self.null_keys}

    @classmethod
    def from_dict(cls, d: object, where: str = "") -> NodeRecord:
        if not isinstance(d, dict):
            raise RecordError(f"{where.rstrip(': ')}: expected an object")
        s = (str, None)
        return cls(get(d, "host", (str,), where, True), get(d, "node_rank", (int,), where, True),
                   get(d, "pid", (int, None), where), get(d, "exit_code", (int, None), where),
                   get(d, "state", s, where), get(d, "run_dir", s, where), get(d, "note", s, where),
                   Trial.from_dict(d, where) if "trial" in d else None,
                   SlurmJob.from_dict(d, where) if "job_id" in d else None,
                   SshProcess.from_dict(d, where) if "shared" in d else None,
                   frozenset(k for k, v in d.items() if v is None))
