"""Read the train runtime's metrics files (<run>/metrics/rank-R.jsonl) as they grow, for the run view's plot.

Incremental: each poll reads only the bytes added since the last one, and keeps a partial last line for the
next poll. A resumed run writes some steps twice; the last record of a step wins (as cockpit.train says).
IO happens in ``poll`` only; call it from a worker."""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from cockpit import run_layout as layout

_NAME = re.compile(r"^rank-(\d+)\.jsonl$")


@dataclass(frozen=True)
class Series:
    rank: int
    steps: tuple[int, ...]
    loss: tuple[float, ...]
    samples_per_s: tuple[float, ...]


class MetricsReader:
    def __init__(self, run_dir: Path, keep: int = 200):
        self.dir = Path(run_dir) / layout.METRICS
        self.keep = keep
        self._offsets: dict[int, int] = {}
        self._partial: dict[int, bytes] = {}
        self._records: dict[int, OrderedDict[int, dict]] = {}

    def poll(self) -> bool:
        """Read what was appended; True if anything new arrived."""
        if not self.dir.is_dir():
            return False
        new = False
        for path in sorted(self.dir.iterdir()):
            m = _NAME.match(path.name)
            if m:
                new |= self._read(int(m.group(1)), path)
        return new

    def _read(self, rank: int, path: Path) -> bool:
        offset = self._offsets.get(rank, 0)
        try:
            with open(path, "rb") as f:
                if path.stat().st_size < offset:  # truncated or replaced: start over
                    offset, self._partial[rank] = 0, b""
                    self._records.pop(rank, None)
                f.seek(offset)
                data = f.read(4 << 20)
        except OSError:
            return False
        if not data:
            return False
        self._offsets[rank] = offset + len(data)
        data = self._partial.pop(rank, b"") + data
        *whole, rest = data.split(b"\n")
        self._partial[rank] = rest
        records = self._records.setdefault(rank, OrderedDict())
        for raw in whole:
            try:
                rec = json.loads(raw)
                step = int(rec["step"])
            except (ValueError, KeyError, TypeError):
                continue  # not a metrics record: skip it, keep reading
            records.pop(step, None)
            records[step] = rec
            while len(records) > self.keep:
                records.popitem(last=False)
        return bool(whole)

    def ranks(self) -> list[int]:
        return sorted(self._records)

    def series(self, rank: int) -> Series | None:
        records = self._records.get(rank)
        if not records:
            return None
        values = list(records.values())
        return Series(rank, tuple(records), tuple(_num(r.get("loss")) for r in values),
                      tuple(_num(r.get("samples_per_s")) for r in values))


def _num(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0
