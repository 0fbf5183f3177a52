"""What one rank said when asked for its stack (the faulthandler dump, its Flight Recorder record, its last
beat), and the token that marks one request: shared by the local and Slurm gatherer (gather) and the ssh
one (remote_stacks)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from cockpit.hang.stacks import FlightRecord, RankStack, parse_dump


@dataclass(frozen=True)
class Evidence:
    """What one rank said when asked."""

    rank: int
    host: str
    text: str  # the faulthandler dump ("" when none came)
    flight: FlightRecord | None
    beat: dict | None

    @property
    def stack(self) -> RankStack:
        return parse_dump(self.text)


def new_request() -> str:
    return f"{time.time():.6f}"
