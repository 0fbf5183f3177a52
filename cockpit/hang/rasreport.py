"""NCCL RAS reports as typed records: what one report says (RasReport, read by cockpit.hang.ras) and what
one node's RAS service answered when asked live with the stacks (NodeRas, read by cockpit.hang.rasread from
cockpit.node.rasask's record). Pure, no imports of cockpit: cockpit.hang.transport carries a NodeRas per node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RasState = Literal["answered", "none", "error"]


@dataclass(frozen=True)
class RasProcess:
    state: str  # INCOMPLETE | DEAD | MISMATCH | unresponsive | ...
    rank: int | None
    pid: int | None
    host: str | None


@dataclass(frozen=True)
class RasReport:
    version: str | None
    comm_states: tuple[tuple[str, str], ...]  # ("#0-0 (hash)" or the hash, "RUNNING OK" / "INCOMPLETE" ...)
    processes: tuple[RasProcess, ...]  # the ranks or processes RAS names as missing, dead or behind
    repaired: bool = False  # the 2.28.x JSON comma was put back

    @property
    def ok(self) -> bool:
        return not self.processes and all(s.endswith("OK") for _, s in self.comm_states)


@dataclass(frozen=True)
class NodeRas:
    """What one node's RAS service answered. ``state``: answered (``report`` read), none (nothing listens:
    no NCCL process there, RAS off), error (no usable answer: ``note`` says why)."""

    addr: str
    state: RasState
    report: RasReport | None = None
    fmt: str | None = None  # "json" | "text"
    ms: float | None = None
    note: str | None = None
