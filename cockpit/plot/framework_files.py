"""Metric points from the files a training framework writes into the run's working directory, read without
changing the script: Hugging Face Trainer's ``trainer_state.json`` (its ``log_history``; in ``output_dir`` at
the end, in ``output_dir/checkpoint-N/`` at each save) and Lightning's CSVLogger ``.../version_N/metrics.csv``
(``lightning_logs/`` under the workdir by default). Both are written by rank 0, so their points are rank 0's.

Which file: found by a bounded walk of the workdir (depth 4, at most 256 entries a folder and 4096 in all,
hidden folders skipped), the one modified last among those modified while the run went (from its start, until
a minute past its end): a workdir many runs share keeps an earlier run's file, which is not this run's. The
walk is done again at most every ``RESCAN`` seconds; the file found is checked at each poll and read again whole
(capped at ``MAX_BYTES``) when it changed.

Neither file records when a step was logged: a step's time is interpolated between the run's start (step 0) and
each read's (modification time, last step), so a finished run read once shows its mean rate.
"""

from __future__ import annotations

import bisect
import csv
import io
import os
import re
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from cockpit.fs import safeio
from cockpit.fs.paths import job_workdir
from cockpit.plot.printed import LOSS_KEYS
from cockpit.plot.sources import LIGHTNING_CSV, TRAINER_STATE, Point, Polled

MAX_BYTES = 32 << 20
RESCAN = 5.0
DEPTH, PER_DIR, MAX_ENTRIES = 4, 256, 4096
SLACK = 60.0  # seconds: a file written this long after the run ended is another run's
_VERSION = re.compile(r"^version_\d+$")


def run_workdir(run_dir: Path) -> Path | None:
    """The ranks' working directory of a run (a sweep's trial: its sweep's job), None when it cannot be told."""
    from cockpit.run.store import read_status
    from cockpit.spec import jobfile
    from cockpit.spec.model import SpecError, parse_spec
    from cockpit.spec.yamlpos import LoadError

    status = read_status(run_dir) or read_status(run_dir.parent)
    for where in (run_dir, run_dir.parent):
        path = where / "job.yaml"
        if status is not None and path.is_file():
            try:
                spec = parse_spec(jobfile.read_text(path), str(path))
            except (OSError, SpecError, LoadError):
                return None
            return Path(job_workdir(status.job_file, spec.workdir))
    return None


def walk(root: Path, depth: int = DEPTH, budget: list[int] | None = None,
         skip: Collection[str] = ()) -> Iterator[Path]:
    """The files under ``root``, depth first, at most PER_DIR entries a folder and MAX_ENTRIES in all; the
    folders named in ``skip`` at its top are left out."""
    budget = [MAX_ENTRIES] if budget is None else budget
    try:
        with os.scandir(root) as it:
            entries = [e for _, e in zip(range(min(PER_DIR, budget[0])), it, strict=False)]
    except OSError:
        return
    budget[0] -= len(entries)
    for e in entries:
        if e.is_file(follow_symlinks=False):
            yield Path(e.path)
        elif depth > 1 and budget[0] > 0 and e.is_dir(follow_symlinks=False) and not e.name.startswith(".") \
                and e.name not in skip:
            yield from walk(Path(e.path), depth - 1, budget)


def run_window(run_dir: Path) -> tuple[float, tuple[float, float], bool] | None:
    """(start, window, final) of a run: when it started, the times a file of it may have been written at (from
    a second before its start until SLACK after its end; no end while it runs), and whether that window moves
    no more (the run is final and has an end). None before status.json says when it started."""
    from cockpit.run.store import read_status

    status = read_status(run_dir)
    start = None if status is None else (status.started or status.created)
    if status is None or start is None:
        return None
    window = start - 1.0, (status.ended + SLACK if status.ended else float("inf"))
    return start, window, bool(status.final and status.ended)


def trainer_state_file(path: Path) -> bool:
    return path.name == "trainer_state.json"


def lightning_csv_file(path: Path) -> bool:
    return path.name == "metrics.csv" and bool(_VERSION.match(path.parent.name))


def trainer_state_points(data: bytes) -> list[tuple[int, float]]:
    """(step, loss) of each training log entry of a trainer_state.json; [] when it is not one."""
    try:
        state = safeio.loads(data)
    except ValueError:
        return []
    history = state.get("log_history") if isinstance(state, dict) else None
    out = []
    for entry in history if isinstance(history, list) else ():
        if not isinstance(entry, dict) or "train_runtime" in entry:
            continue
        step, loss = entry.get("step"), entry.get("loss")
        if isinstance(step, int) and not isinstance(step, bool) and isinstance(loss, (int, float)) \
                and not isinstance(loss, bool):
            out.append((step, float(loss)))
    return out


def lightning_csv_points(data: bytes) -> list[tuple[int, float]]:
    """(step, training loss) of each row of a CSVLogger metrics.csv that has one; [] when it has no loss column."""
    reader = csv.reader(io.StringIO(data.decode("utf-8", "replace")))
    header = [h.strip().lower() for h in next(reader, [])]
    column = next((header.index(k) for k in LOSS_KEYS if k in header), None)
    if column is None or "step" not in header:
        return []
    at = header.index("step")
    out = []
    for row in reader:
        try:
            out.append((int(float(row[at])), float(row[column])))
        except (ValueError, IndexError):
            continue  # a row of other metrics (validation), or a cut last row
    return out


class FrameworkFile:
    """One framework's file in the run's workdir, as a MetricSource of rank 0."""

    def __init__(self, run_dir: Path, name: str, matches: Callable[[Path], bool],
                 parse: Callable[[bytes], list[tuple[int, float]]]):
        self.run_dir, self.name, self._matches, self._parse = run_dir, name, matches, parse
        self._workdir: Path | None = None
        self._scanned = -RESCAN
        self._file: Path | None = None
        self._seen: tuple[Path, int, int] | None = None  # (path, mtime_ns, size) last read
        self._anchors: dict[int, float] = {}  # step -> time: the run's start, and each read's last step
        self._ended: tuple[float, float] | None = None  # the window of a run that ended: it moves no more

    def poll(self, skip: Collection[int]) -> Polled:
        if 0 in skip:
            return {}
        window = self._window()
        if window is None:
            return {}
        now = time.monotonic()
        if now - self._scanned >= RESCAN:
            self._scanned, self._file = now, self._find(window)
        if self._file is None:
            return {}
        return self._read(self._file)

    def _window(self) -> tuple[float, float] | None:
        """The times a file of this run may have been written at; read from status.json until the run ended."""
        if self._ended is not None:
            return self._ended
        found = run_window(self.run_dir)
        if found is None:
            return None
        start, window, final = found
        if self._workdir is None:
            self._workdir = run_workdir(self.run_dir)
        self._anchors.setdefault(0, start)
        if final:
            self._ended = window
        return window

    def _find(self, window: tuple[float, float]) -> Path | None:
        best: tuple[float, Path] | None = None
        for path in walk(self._workdir) if self._workdir else ():
            if not self._matches(path):
                continue
            try:
                mtime = path.stat().st_mtime
            except OSError:
                continue
            if window[0] <= mtime <= window[1] and (best is None or mtime > best[0]):
                best = (mtime, path)
        return None if best is None else best[1]

    def _read(self, path: Path) -> Polled:
        try:
            st = path.stat()
            if self._seen == (path, st.st_mtime_ns, st.st_size):
                return {}
            data = safeio.read_bytes(path, MAX_BYTES)
        except OSError:
            return {}
        self._seen = (path, st.st_mtime_ns, st.st_size)
        pairs = self._parse(data)
        if not pairs:
            return {}
        last = max(step for step, _ in pairs)
        self._anchors[last] = max(st.st_mtime, max(self._anchors.values()))
        points: list[Point] = [(step, _time(self._anchors, step), loss) for step, loss in pairs]
        return {0: (points, True)}


def _time(anchors: dict[int, float], step: int) -> float:
    """The step's time, linear between the anchors around it (the last anchor's past the end)."""
    steps = sorted(anchors)
    i = bisect.bisect_left(steps, step)
    if i >= len(steps):
        return anchors[steps[-1]]
    if steps[i] == step or i == 0:
        return anchors[steps[i]]
    s0, s1 = steps[i - 1], steps[i]
    return anchors[s0] + (anchors[s1] - anchors[s0]) * (step - s0) / (s1 - s0)


def framework_sources(run_dir: Path) -> list[FrameworkFile]:
    """The framework file sources of a run, in precedence order."""
    return [FrameworkFile(run_dir, TRAINER_STATE, trainer_state_file, trainer_state_points),
            FrameworkFile(run_dir, LIGHTNING_CSV, lightning_csv_file, lightning_csv_points)]
