"""status.json's per-rank progress (``progress``) as a typed value: what cockpit.hang's watchdog writes once a
second, what ps, the summary, the follower and the TUI read.

Pure and stdlib only, beside RunStatus, which holds it (in cockpit.hang it would make a circle: hang imports
cockpit.run.store). Dicts exist only at the JSON edge: ``from_dict`` checks each field (RecordError names it);
``to_dict`` writes back exactly the keys it was read with, in sorted order as status.json holds them, so a
status.json reads and writes back byte for byte and `cockpit ps --json` prints what it printed. Numbers stay as
read (JSON ``5`` stays ``5``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from cockpit.run.records import NUM, RecordError, get

RankState = Literal["running", "stopped", "exited", "not responding", "unknown"]
Flag = Literal["stopped", "stalled", "straggler", "culprit", "waiting"]  # what the rank table shows of a rank
StepSource = Literal["metrics", "syncs", "printed"]  # printed: the TUI's, from the log (never in status.json)

# the JSON keys besides host and state, each as the field that holds it ("in": the collective it is inside)
_OPTIONAL = {"step": "step", "step_source": "step_source", "rate": "rate", "wait": "wait", "in": "collective",
             "in_since": "in_since", "last_output": "last_output", "flag": "flag"}
_TYPES: dict[str, tuple] = {"step": (int, None), "step_source": (str, None), "rate": (*NUM, None),
                            "wait": (*NUM, None), "in": (str, None), "in_since": (*NUM, None),
                            "last_output": (*NUM, None), "flag": (str, None)}


@dataclass(frozen=True)
class RankProgress:
    """One rank as the watchdog last saw it; status.json's ``progress[str(rank)]``."""

    host: str
    state: RankState
    step: int | None = None  # its last step (metrics, printed), or its completed collectives (syncs)
    step_source: StepSource | None = None  # where ``step`` comes from
    rate: float | None = None  # steps per second over the last window
    wait: float | None = None  # the share of its time spent waiting in collectives
    collective: str | None = None  # JSON "in": the collective it is inside now
    in_since: float | None = None  # since when (wall time)
    last_output: float | None = None  # wall time of its log's last write
    flag: Flag | None = None
    absent: frozenset[str] = field(default=frozenset(), compare=False)  # JSON keys an older writer did not write

    def to_dict(self) -> dict:
        if not self.absent:  # every key, written straight in sorted order (4,096 ranks at every status write)
            return {"flag": self.flag, "host": self.host, "in": self.collective, "in_since": self.in_since,
                    "last_output": self.last_output, "rate": self.rate, "state": self.state, "step": self.step,
                    "step_source": self.step_source, "wait": self.wait}
        d: dict[str, object] = {"host": self.host, "state": self.state}
        d.update((key, getattr(self, name)) for key, name in _OPTIONAL.items() if key not in self.absent)
        return dict(sorted(d.items()))

    @classmethod
    def from_dict(cls, d: object, where: str = "") -> RankProgress:
        if not isinstance(d, dict):
            raise RecordError(f"{where.rstrip(': ')}: expected an object")
        values = {name: get(d, key, _TYPES[key], where) for key, name in _OPTIONAL.items()}
        return cls(get(d, "host", (str,), where, True), get(d, "state", (str,), where, True), **values,
                   absent=frozenset(k for k in _OPTIONAL if k not in d))


def progress_from_dict(d: object, where: str = "progress") -> dict[str, RankProgress]:
    """status.json's ``progress`` object: str(rank) -> RankProgress."""
    if not isinstance(d, dict):
        raise RecordError(f"{where}: expected an object")
    return {r: RankProgress.from_dict(rec, f"{where}.{r}: ") for r, rec in d.items()}
