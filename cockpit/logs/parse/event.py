"""The parser's output: ``Event``, one fact or failure read from a log (``parser.LineParser`` makes them).

Pure data, stdlib-only; ``parse`` re-exports it, so ``from cockpit.logs.parse.parser import Event`` is the usual import.
"""

from __future__ import annotations

from dataclasses import dataclass

from cockpit.logs.parse.kinds import FAILURE_KINDS


@dataclass(frozen=True)
class Event:
    """One fact or failure read from a log. Every optional field is None where the text does not say."""

    line: int
    """1-based number of the physical line the record starts on."""
    kind: str
    """One of ``FAILURE_KINDS`` or ``INFO_KINDS``."""
    text: str
    """The record's text: ANSI removed, hard wraps joined, prefixes kept, cut at ``MAX_TEXT``."""
    rank: int | None = None
    """Global rank where known. For Init START/COMPLETE and channel lines: the communicator rank printed."""
    host: str | None = None
    pid: int | None = None
    cuda_dev: int | None = None
    ts: float | None = None
    """Seconds since the start of the year, from the first timestamp on the line (see ``timestamp``)."""
    version: str | None = None
    network: str | None = None
    transport: str | None = None
    interface: str | None = None
    interfaces: tuple[str, ...] = ()
    address: str | None = None
    op: str | None = None
    seq: int | None = None
    timeout_ms: int | None = None
    elapsed_ms: int | None = None
    exit_code: int | None = None
    bus_id: str | None = None
    nranks: int | None = None

    @property
    def is_failure(self) -> bool:
        """True for the failure vocabulary, False for informational kinds."""
        return self.kind in FAILURE_SET


FAILURE_SET = frozenset(FAILURE_KINDS)


def new_event(fields: dict[str, object]) -> Event:
    """Build an Event from the fields a line gave; the rest keep their class defaults.

    Same value as ``Event(**fields)``. The generated ``__init__`` of a frozen dataclass sets all 21 fields
    one ``object.__setattr__`` at a time, which costs more than parsing the line; this sets only the given
    ones, in one call. Only the parser uses it, on fields it has just validated.
    """
    event = object.__new__(Event)
    event.__dict__.update(fields)
    return event
