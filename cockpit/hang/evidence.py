"""What one rank said when asked for its stack (the faulthandler dump, its Flight Recorder record, its last
beat, its DataLoader workers' stacks), and the token that marks one request: shared by the local and Slurm
gatherer (gather) and the ssh one (cockpit.launch.ssh.stacks)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from cockpit.hang.stacks import FlightRecord, RankStack, parse_dump
from cockpit.hang.transport import TransportGather


@dataclass(frozen=True)
class WorkerStack:
    """A process the rank forked (a DataLoader worker), as the rank's hook saw it when asked: its process
    state and kernel wait channel (/proc), its faulthandler dump ("" when it gave none: a process blocked
    in the kernel, state D, runs no signal handler), and the source lines of the frames in it."""

    pid: int
    state: str | None
    wchan: str | None
    text: str
    lines: dict[str, str]  # "path:line" -> that line of source, as the rank's node read it

    @property
    def stack(self) -> RankStack:
        return parse_dump(self.text)

    @classmethod
    def from_dict(cls, d: dict) -> WorkerStack | None:
        """From the hook's record ({"pid", "state", "wchan", "text", "lines"}); None when it is not one."""
        try:
            lines = {str(k): str(v) for k, v in (d.get("lines") or {}).items()}
            return cls(int(d["pid"]), d.get("state") or None, d.get("wchan") or None, str(d.get("text") or ""),
                       lines)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


@dataclass(frozen=True)
class Evidence:
    """What one rank said when asked."""

    rank: int
    host: str
    text: str  # the faulthandler dump ("" when none came)
    flight: FlightRecord | None
    beat: dict | None
    workers: tuple[WorkerStack, ...] = ()  # its forked children (DataLoader workers), when it has any
    link: TransportGather | None = None  # every node's transport evidence, gathered with the stacks (ssh runs)

    @property
    def stack(self) -> RankStack:
        return parse_dump(self.text)


def workers_of(record: object, request: str) -> tuple[WorkerStack, ...]:
    """The workers in a rank's answer to ``request`` (logs/rank-R.HOST.workers: {"req", "workers": [...]})."""
    if not isinstance(record, dict) or record.get("req") != request:
        return ()
    found = (WorkerStack.from_dict(w) for w in record.get("workers") or () if isinstance(w, dict))
    return tuple(w for w in found if w is not None)


def new_request() -> str:
    return f"{time.time():.6f}"
