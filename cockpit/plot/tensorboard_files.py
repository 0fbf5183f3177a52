"""TensorBoard event files as a metric source: what a script's ``SummaryWriter`` (torch.utils.tensorboard), a
Lightning TensorBoardLogger or a Hugging Face Trainer's TensorBoard callback wrote, read without changing the
script. The records are read by tensorboard's own EventFileLoader (the package TensorBoard itself reads them
with), never by a parser of cockpit's: ``pip install tensorboard``. Without that package nothing is read, and
``skipped()`` says where event files were found and how to read them.

Which files: ``events.out.tfevents.<time>.<host>.<pid>...`` found by a bounded walk (cockpit.plot.
framework_files.walk, again at most every RESCAN seconds) of the run directory (cockpit's own folders left
out) and of the job's workdir, begun (the time in the name) and written while the run went. A file under a
folder named for evaluation (``val``, ``eval``, ``test``...) is not training. The writer's pid in the name is
looked up among the ranks' pid records: a rank that writes its own file has its own points; when no file is a
rank's (a writer in a child process, pid records gone), every file found is rank 0's.

Which scalar: a training loss under the names frameworks give it (cockpit.plot.printed.LOSS_KEYS, compared in
lower case with spaces as ``_``: ``loss``, ``train_loss``, ``train/loss``, ``Loss/train``, ``training loss``,
Lightning's ``train_loss_step``), the most specific a rank's files hold. Its step is the event's step, its time
the event's wall time: unlike the other sources', real times.

Incremental and bounded: each file's loader holds its place, so a poll parses only the events appended since
the last one, at most MAX_EVENTS a file a poll (the package checks each record's CRC in Python: ~40 us an
event, so a file of 100,000 events takes 4 s to read the first time); at most MAX_FILES files are read (the
newest); the loader
keeps one read buffer a file (tensorboard's 16 MiB block at most). The file is opened once, as a regular file
and not through a symlink (cockpit.fs.safeio), and the loader reads that open file (/proc/self/fd/N), so a
FIFO or a link put at its name later is never opened. A record the loader cannot parse ends that file's reading,
with the reason in ``skipped()``.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from cockpit.fs import safeio
from cockpit.plot.framework_files import RESCAN, run_window, run_workdir, walk
from cockpit.plot.printed import LOSS_KEYS
from cockpit.plot.sources import TENSORBOARD, Point, Polled
from cockpit.run import layout

MAX_FILES = 16
# a file's events parsed in one poll (~1 s: tensorboard checks each record's CRC in Python, ~40 us an event), so a
# poll's time is bounded however far behind it is; a live view catches up a poll at a time
MAX_EVENTS = 25_000
SKEW = 5.0  # seconds a writer's clock (another node's) may be behind the run's start
HINT = "pip install tensorboard"
LOSS_TAGS = (*LOSS_KEYS, "train/loss_step")
_NAME = re.compile(r"^events\.out\.tfevents\.(\d+)(?:\.\d+)?\.(.+)\.(\d+)\.\d+(?:\..*)?$")
_EVAL = re.compile(r"(?:^|[_\-/. ])(val|valid|validation|eval|evaluation|test)(?:$|[_\-/. ])", re.IGNORECASE)
_OWN = (layout.LOGS, layout.METRICS, layout.HOOK, layout.COMMANDS)  # cockpit's folders in a run directory
Scalar = tuple[int, int, float, float]  # (the tag's place in LOSS_TAGS, step, wall time, value)


def event_file(name: str) -> tuple[float, str, int] | None:
    """(when it was begun, the writer's host, its pid) of an event file's name; None for any other name."""
    found = _NAME.match(name)
    return None if found is None else (float(found.group(1)), found.group(2), int(found.group(3)))


def training_dir(relative: str) -> bool:
    """Whether the folder an event file is in (relative to where the walk began) holds training scalars: not
    one named for evaluation (a second writer for validation logs its own ``loss``)."""
    return _EVAL.search(relative) is None


def loss_rank(tag: str) -> int | None:
    """How specific ``tag`` is as the training loss (0: the most; LOSS_TAGS' order), None: not a loss."""
    key = tag.strip().lower().replace(" ", "_")
    return LOSS_TAGS.index(key) if key in LOSS_TAGS else None


def _reader() -> tuple[Any, Any]:
    """tensorboard's event loader and make_ndarray; ImportError without the package. The loader without the
    read-time compat layers (EventFileLoader's): those rewrite every event (a third of the read's time), and a
    scalar is read here in both forms they unify (``simple_value``; a scalar tensor, TF2's writers')."""
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
    from tensorboard.util.tensor_util import make_ndarray

    return LegacyEventFileLoader, make_ndarray


class _EventFile:
    """One event file, opened once; ``read`` hands back the loss-like scalars appended since the last read."""

    def __init__(self, path: Path, reader: tuple[Any, Any]):
        self.path, self._make_ndarray = path, reader[1]
        self._file = safeio.open_regular(path)
        self.error: str | None = None
        self.at_end = False  # the last read reached the file's end
        try:
            self._loader = reader[0](f"/proc/self/fd/{self._file.fileno()}")
        except Exception as exc:  # tensorboard's own errors are not OSErrors
            self.error = f"TensorBoard event file not opened ({type(exc).__name__}: {exc})"
            self._file.close()

    def read(self) -> list[Scalar]:
        out: list[Scalar] = []
        if self.error is not None or self._file.closed:
            return out
        events = 0
        try:
            for event in itertools.islice(self._loader.Load(), MAX_EVENTS):  # the rest stays for the next read
                events += 1
                for value in event.summary.value if event.HasField("summary") else ():
                    tag = loss_rank(value.tag)
                    if tag is not None and (number := self._scalar(value)) is not None:
                        out.append((tag, event.step, event.wall_time, number))
        except Exception as exc:  # a record tensorboard cannot parse (a damaged file): this file is read no more
            self.error = f"TensorBoard event file not read past a damaged record ({type(exc).__name__}: {exc})"
            self.close()
        self.at_end = events < MAX_EVENTS
        return out

    def _scalar(self, value: Any) -> float | None:
        """A summary value's number: ``simple_value`` (SummaryWriter.add_scalar), or a one-element tensor of the
        scalars plugin (tf.summary.scalar, add_scalar(new_style=True)); None for anything else (a histogram)."""
        kind = value.WhichOneof("value")
        if kind == "simple_value":
            return float(value.simple_value)
        if kind == "tensor" and value.metadata.plugin_data.plugin_name == "scalars":
            array = self._make_ndarray(value.tensor)
            return float(array.reshape(-1)[0]) if array.size == 1 else None
        return None

    def close(self) -> None:
        self._file.close()


class TensorBoardFiles:
    """The TensorBoard event files of a run, as a MetricSource (see the module's docstring)."""

    name = TENSORBOARD

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self._workdir: Path | None = None
        self._scanned = -RESCAN
        self._files: dict[Path, _EventFile] = {}
        self._ranks: dict[Path, int | None] = {}  # file -> the rank whose pid wrote it (None: no rank's)
        self._tags: dict[int, int] = {}  # rank -> the loss tag its points are of (its place in LOSS_TAGS)
        self._missing: tuple[Path, str] | None = None  # event files found, and why they are not read
        self._ended = False

    def poll(self, skip: Collection[int]) -> Polled:
        now = time.monotonic()
        if now - self._scanned >= RESCAN and not self._ended:
            self._scanned = now
            self._scan()
        by_rank: dict[int, list[Scalar]] = {}
        for path, file in self._files.items():
            rank = self._rank_of(path)
            if rank is not None and rank not in skip:
                by_rank.setdefault(rank, []).extend(file.read())
                if self._ended and file.at_end:
                    file.close()  # the run ended and its file is read to its end: nothing more comes
        return {rank: found for rank, read in sorted(by_rank.items()) if (found := self._chosen(rank, read))}

    def skipped(self) -> list[tuple[Path, str]]:
        """Event files not read, and why: the package missing (said for the folder of one found), a damaged
        file."""
        out = [(f.path, f.error) for f in self._files.values() if f.error is not None]
        return out + ([self._missing] if self._missing is not None else [])

    def at_end(self) -> bool:
        """Whether the last poll read every file found to its end."""
        return all(f.at_end or f.error is not None for f in self._files.values())

    def close(self) -> None:
        """Close the event files held open (a reader done with the run)."""
        for file in self._files.values():
            file.close()

    def _rank_of(self, path: Path) -> int | None:
        """The rank a file's points are: its writer's; rank 0 when no file found is a rank's."""
        rank = self._ranks.get(path)
        if rank is not None:
            return rank
        return 0 if not any(r is not None for r in self._ranks.values()) else None

    def _chosen(self, rank: int, read: list[Scalar]) -> tuple[list[Point], bool] | None:
        """The points of the rank's loss tag: its most specific yet; when a more specific one appears, its
        points replace the others'."""
        if not read:
            return None
        best = min(tag for tag, *_ in read)
        replace = rank in self._tags and best < self._tags[rank]
        tag = self._tags[rank] = min(best, self._tags.get(rank, best))
        points: list[Point] = [(step, wall, value) for t, step, wall, value in read if t == tag and step >= 0]
        return (points, replace) if points or replace else None

    def _scan(self) -> None:
        found = run_window(self.run_dir)
        if found is None:
            return
        start, window, final = found
        if self._workdir is None:
            self._workdir = run_workdir(self.run_dir)
        paths = self._find(start, window)
        self._ended = final
        new = [p for p in paths if p not in self._files][: max(0, MAX_FILES - len(self._files))]
        if new:
            self._open(new)
        if any(self._ranks.get(path) is None for path in self._files):  # a writer's pid record may come later
            pids = _rank_pids(self.run_dir)
            self._ranks.update({path: _writer_rank(path.name, pids) for path in self._files
                                if self._ranks.get(path) is None})

    def _open(self, paths: list[Path]) -> None:
        try:
            reader = _reader()
        except Exception as exc:  # ImportError; a broken install (protobuf too old) raises others
            why = "not installed" if isinstance(exc, ImportError) else f"not usable ({type(exc).__name__}: {exc})"
            self._missing = (paths[0].parent, f"TensorBoard event files, not read: the tensorboard package is "
                                              f"{why} (hint: {HINT})")
            return
        for path in paths:
            try:
                self._files[path] = _EventFile(path, reader)
            except OSError:
                continue  # gone since the walk, or not a regular file: not an event file of this run

    def _find(self, start: float, window: tuple[float, float]) -> list[Path]:
        """The run's event files, newest first: begun after its start, written within its window."""
        seen: set[tuple[int, int]] = set()
        found: list[tuple[float, Path]] = []
        roots = [(self.run_dir, _OWN)] + ([(self._workdir, ())] if self._workdir else [])
        for root, skip in roots:
            for path in walk(root, skip=skip):
                named = event_file(path.name)
                if named is None or named[0] < start - SKEW or not training_dir(str(path.parent.relative_to(root))):
                    continue
                try:
                    st = path.stat(follow_symlinks=False)
                except OSError:
                    continue
                if window[0] <= st.st_mtime <= window[1] and (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    found.append((named[0], path))
        return [path for _, path in sorted(found, key=lambda f: (-f[0], str(f[1])))]


def _rank_pids(run_dir: Path) -> dict[int, list[tuple[int, str]]]:
    """pid -> [(rank, host)] of the ranks' pid records (logs/rank-R.HOST.pid)."""
    out: dict[int, list[tuple[int, str]]] = {}
    for rank, (host, path) in layout.rank_files(run_dir, "pid").items():
        try:
            pid = int(safeio.read_bytes(path, 64).split()[0])
        except (OSError, ValueError, IndexError):
            continue
        out.setdefault(pid, []).append((rank, host))
    return out


def _writer_rank(name: str, pids: dict[int, list[tuple[int, str]]]) -> int | None:
    """The rank whose process wrote the event file ``name``: by its pid, and by its host where two ranks on two
    nodes had the same pid; None when no rank's."""
    named = event_file(name)
    ranks = pids.get(named[2], []) if named else []
    if len(ranks) > 1 and named:
        short = named[1].split(".")[0]
        ranks = [r for r in ranks if r[1].split(".")[0] == short] or ranks
    return min(r for r, _ in ranks) if ranks else None
