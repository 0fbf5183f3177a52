"""torchelastic's failure table: ``[N]:`` then ``time/host/rank/exitcode/...  : value`` lines, one record per
failed worker (the one under "Root Cause (first observed failure)" is the root cause).

Pure, stdlib-only; ``parser.LineParser`` owns one and hands it the records that may belong to a table.
"""

from __future__ import annotations

import re

from cockpit.logs.parse.event import Event, new_event
from cockpit.logs.parse.kinds import ELASTIC_ROOT_CAUSE, WORKER_FAILED
from cockpit.logs.parse.prefix import timestamp

_TABLE_HEAD = re.compile(r"\[(\d+)\]:\s*$")
_TABLE_KEY = re.compile(r"\s+(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")
_TABLE_EXIT = re.compile(r"\s*exitcode\s*:\s*(-?\d+)")
_FIRST_INT = re.compile(r"-?\d+")


class FailureTable:
    """The table record being read, if any, and whether the next one is the root cause."""

    __slots__ = ("record", "root_next")

    def __init__(self) -> None:
        self.record: dict[str, object] | None = None
        """The record being read (rank, host, ts so far); None outside a table."""
        self.root_next = False
        """The next record is torchelastic's "Root Cause" (its line came just before)."""

    def read(self, lineno: int, text: str, host: str | None, rank: int | None) -> tuple[bool, list[Event]]:
        """torchelastic's failure table: ``[N]:`` then ``time/host/rank/exitcode/...  : value`` lines."""
        head = _TABLE_HEAD.match(text)
        if head:
            self.record = {"rank": int(head[1]), "root": self.root_next}
            self.root_next = False
            return True, []
        record = self.record
        if record is None:
            m = _TABLE_EXIT.match(text)  # a record whose head is outside the excerpt
            if not m:
                return False, []
            return True, [new_event({"line": lineno, "kind": WORKER_FAILED, "text": text, "rank": rank,
                                      "host": host, "exit_code": int(m[1])})]
        m = _TABLE_KEY.match(text)
        if not m:
            self.record = None
            return False, []
        key, value = m[1], m[2].strip()
        if key == "exitcode":
            code = _FIRST_INT.search(value)
            fields = {"line": lineno, "kind": WORKER_FAILED, "text": text,
                      "exit_code": int(code[0]) if code else None,
                      "rank": rank if rank is not None else record.get("rank"),
                      "host": host or record.get("host"), "ts": record.get("ts")}
            events = [new_event(fields)]
            if record.get("root"):
                events.append(new_event({**fields, "kind": ELASTIC_ROOT_CAUSE}))
            return True, events
        if key == "rank":
            number = _FIRST_INT.search(value)
            if number:
                record["rank"] = int(number[0])
        elif key == "host":
            record["host"] = value or None
        elif key == "time":
            record["ts"] = timestamp(value)
        return True, []
