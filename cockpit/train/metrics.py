"""Per-rank metrics as JSON lines, and the progress lines a user tailing the logs reads.

Each rank appends to ``<run_dir>/metrics/rank-<RANK>.jsonl`` one object per record::

    {"step": 120, "epoch": 1, "loss": 0.0421, "samples_per_s": 5012.3, "time": 1732350000.12, "rank": 0,
     "cpu_s": 41.203}

``step`` counts optimizer steps from the start of the run (a resumed run continues the count), ``loss`` is
this rank's loss of that step, ``samples_per_s`` is this rank's throughput since its previous record,
``time`` is Unix time, and ``cpu_s`` the rank process's CPU seconds so far (all its threads:
``time.process_time()``): what the steps cost, whatever else shares the machine. ``total_steps``, when the
runtime knows it (epochs x batches per epoch, or what the script set as ``rt.total_steps``), is the step count
the run will end at: cockpit's forecast reads it. It is absent otherwise, and readers ignore keys they do not
know. The file is opened line-buffered and flushed per record, so a reader never sees half a line of a live
run. After a resume the steps between the checkpoint and the crash appear twice; readers keep the last record
of each step.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TextIO

from cockpit.run import layout

PREFIX = "[cockpit]"


def metrics_path(run_dir: Path, rank: int) -> Path:
    """``<run_dir>/metrics/rank-<rank>.jsonl``."""
    return layout.metrics_file(run_dir, rank)


class Throughput:
    """Samples per second over the interval since the last :meth:`rate` call."""

    def __init__(self) -> None:
        self._since = time.perf_counter()
        self._samples = 0

    def restart(self) -> None:
        """Start the interval now (at the first batch, so setup time is not counted)."""
        self._since = time.perf_counter()
        self._samples = 0

    def add(self, samples: int) -> None:
        """Count ``samples`` processed since the interval started."""
        self._samples += samples

    def rate(self) -> float:
        """Samples per second over the interval, then start a new interval."""
        now = time.perf_counter()
        rate = self._samples / max(now - self._since, 1e-9)
        self._since, self._samples = now, 0
        return rate


class MetricsWriter:
    """Appends this rank's metrics lines to ``path`` (line-buffered, flushed per line)."""

    def __init__(self, path: Path, rank: int) -> None:
        self.path = path
        self.rank = rank
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: TextIO | None = path.open("a", buffering=1, encoding="utf-8")

    def write(self, *, step: int, epoch: int, loss: float, samples_per_s: float,
              total_steps: int | None = None) -> dict[str, float | int]:
        """Append one record and return it."""
        line = {
            "step": step, "epoch": epoch, "loss": loss, "samples_per_s": round(samples_per_s, 3),
            "time": time.time(), "rank": self.rank, "cpu_s": round(time.process_time(), 4),
        }
        if total_steps is not None:
            line["total_steps"] = total_steps
        if self._fh is None:
            raise ValueError(f"metrics file {self.path} is closed; hint: no records after rt.finish()")
        self._fh.write(json.dumps(line) + "\n")
        self._fh.flush()
        return line

    def close(self) -> None:
        """Close the file (safe to call twice)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def progress_line(*, step: int, epoch: int, loss: float, samples_per_s: float) -> str:
    """Rank 0's progress line, ``key=value`` so a log parser can read it."""
    return f"{PREFIX} step={step} epoch={epoch} loss={loss:.6f} samples/s={samples_per_s:.1f}"
