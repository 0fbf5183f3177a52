"""Stacks and Flight Recorder traces -> who is stuck where, and who waits for whom. Pure: text in, values out.

A rank blocked inside a collective is a victim: it waits for a rank that has not joined. The culprit is a
live rank that is NOT in a collective (stuck in its own code: a data reader, a deadlock, a skipped
collective), or a rank that is stopped. torchrun's failure table names the rank that timed out waiting,
which is a victim; this module names the culprit.

faulthandler's format (CPython 3.8-3.13)::

    Thread 0x00007f... (most recent call first):
      File "/path/file.py", line 12 in func
    <blank>
    Current thread 0x00007f... (most recent call first):
      File ...
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-f]+)(?: \[[^\]]*\])? \(most recent call first\):")
_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.+)$')
_LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python3", "/hook/sitecustomize.py", "<frozen ")
COLLECTIVE_NAMES = frozenset((
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter",
    "reduce_scatter_tensor", "broadcast", "broadcast_object_list", "reduce", "gather", "scatter", "all_to_all",
    "all_to_all_single", "barrier", "monitored_barrier", "send", "recv", "wait"))
# Waits for the other ranks that are not collectives of the training loop: forming the process group (every
# rank must arrive), and DDP's constructor (it checks and broadcasts the parameters across ranks).
STARTUP_NAMES = frozenset(("init_process_group", "new_group", "new_subgroups", "init_device_mesh"))
INIT = "init_process_group"
DDP_INIT = "DistributedDataParallel"
DATALOADER = "torch/utils/data/dataloader.py"
_WORKER_LOOP = ("torch/utils/data/_utils/worker.py", "multiprocessing/process.py")
MARKER = "--- cockpit stacks "


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    function: str

    @cached_property
    def user(self) -> bool:
        """Code of the job's own, not Python's, torch's or cockpit's hook."""
        return not any(part in self.path for part in _LIBRARY)

    def where(self) -> str:
        return f"{self.function} ({self.path.rsplit('/', 1)[-1]}:{self.line})"


@dataclass(frozen=True)
class Thread:
    ident: str
    current: bool
    frames: tuple[Frame, ...]  # most recent first

    @property
    def is_main(self) -> bool:
        """Threads started by `threading` end in its _bootstrap; the main thread does not."""
        return bool(self.frames) and not self.frames[-1].path.endswith("threading.py")

    @property
    def is_hook(self) -> bool:
        return any(f.path.endswith("hook/sitecustomize.py") and f.function == "_beat_loop" for f in self.frames)


@dataclass(frozen=True)
class RankStack:
    """One rank's dump, read: what its main thread is doing. Its answers are worked out once each (cached
    properties: a stall at 4,096 ranks asks each several times, for the finding, the classes and the report)."""

    threads: tuple[Thread, ...]

    @cached_property
    def main(self) -> Thread | None:
        mains = [t for t in self.threads if t.is_main and not t.is_hook]
        return next((t for t in mains if t.current), mains[0] if mains else None)

    @cached_property
    def user_frame(self) -> Frame | None:
        """The innermost frame of the job's own code in the main thread."""
        main = self.main
        return next((f for f in main.frames if f.user), None) if main else None

    @cached_property
    def collective(self) -> str | None:
        """The torch.distributed call the main thread is blocked in (None: not in one): a collective, backward
        under DDP, or a wait for the other ranks at start (``init_process_group``, DDP's constructor)."""
        for f in self._library_frames:
            if "torch/distributed" in f.path and f.function in COLLECTIVE_NAMES:
                return f.function
            if f.path.endswith(("torch/autograd/__init__.py", "torch/_tensor.py")) and f.function == "backward":
                return "backward"
            if "torch/distributed" in f.path and f.function in STARTUP_NAMES:
                return INIT if f.function != "new_group" else "new_group"
            if f.path.endswith("torch/nn/parallel/distributed.py") and f.function == "__init__":
                return DDP_INIT
        return None

    @cached_property
    def waits_on_loader(self) -> bool:
        """The main thread waits for the next batch from a DataLoader (its workers, with num_workers > 0)."""
        return any(f.path.endswith(DATALOADER) for f in self._library_frames)

    @cached_property
    def _library_frames(self) -> tuple[Frame, ...]:
        """The main thread's innermost frames, up to the first of the job's own code."""
        main = self.main
        out = []
        for f in main.frames if main else ():
            if f.user:
                break
            out.append(f)
        return tuple(out)

    @cached_property
    def worker_frame(self) -> Frame | None:
        """In a DataLoader worker's dump: the innermost frame of the job's own code the worker runs (a
        Dataset's __getitem__, a collate_fn); None while it waits for work in torch's worker loop. The frames
        below that loop are the rank's, copied at fork, and say nothing of the worker."""
        main = self.main
        for f in main.frames if main else ():
            if f.path.endswith(_WORKER_LOOP):
                return None
            if f.user:
                return f
        return None


def parse_dump(text: str) -> RankStack:
    """Threads of one faulthandler dump (the text after the last marker)."""
    threads: list[Thread] = []
    frames: list[Frame] = []
    ident, current = None, False
    for line in text.splitlines():
        m = _THREAD.match(line)
        if m:
            if ident is not None:
                threads.append(Thread(ident, current, tuple(frames)))
            ident, current, frames = m.group(2), m.group(1).startswith("Current"), []
            continue
        f = _FRAME.match(line)
        if f and ident is not None:
            frames.append(Frame(f.group(1), int(f.group(2)), f.group(3).strip()))
    if ident is not None:
        threads.append(Thread(ident, current, tuple(frames)))
    return RankStack(tuple(threads))


HOOK_FILES = ("/hook/sitecustomize.py", "/hook/cockpit_rankspawn.py", "/hook/cockpit_rankworkers.py",
              "/hook/cockpit_ranklinks.py", "/hook/cockpit_linkread.py", "/hook/cockpit_ifaces.py",
              "/hook/cockpit_rasask.py")


def without_hook(text: str) -> str:
    """A dump as the user would read it without cockpit: the frames of the hook's wrappers (the timed
    collectives, backward, DDP's constructor) and the hook's own threads (the beat) left out; every other line
    kept as it is. `cockpit stacks --raw` shows the dump whole."""
    out: list[str] = []
    block: list[str] = []  # one thread's lines (header, frames, the blank line after), or lines between threads
    hook_frames = other_frames = 0

    def flush() -> None:
        if not (hook_frames and not other_frames):  # a thread of the hook's only (threading's frames aside)
            out.extend(block)
        block.clear()

    for line in text.splitlines(keepends=True):
        if _THREAD.match(line) or (not line.strip() and block and _THREAD.match(block[0])):
            if not line.strip():  # the blank line that ends a thread goes with it
                block.append(line)
            flush()
            hook_frames = other_frames = 0
            if line.strip():
                block.append(line)
            continue
        f = _FRAME.match(line)
        if f and f.group(1).endswith(HOOK_FILES):
            hook_frames += 1
            continue
        if f and not f.group(1).endswith("threading.py"):
            other_frames += 1
        block.append(line)
    flush()
    return "".join(out)


def last_dump(text: str) -> str:
    """The part of a .stacks file after its last request marker (all of it when there is none)."""
    at = text.rfind(MARKER)
    return text if at < 0 else text[text.find("\n", at) + 1:]


def marker(request: str, now: float) -> str:
    return f"{MARKER}{request} {now:.3f} ---\n"


@dataclass(frozen=True)
class FlightRecord:
    """A rank's Flight Recorder view of the default process group: the last collective it enqueued and the
    last one that completed, by sequence number, and the name of the one it last enqueued."""

    enqueued: int | None
    completed: int | None
    op: str | None


def parse_flight_record(text: str) -> FlightRecord | None:
    """torch's `_dump_fr_trace_json()`. torch 2.13's own fr_trace analyser fails on gloo dumps (pg_config
    key '' vs '0'), so only the fields needed are read, by hand. None when unreadable."""
    try:
        data = json.loads(text)
        status = data.get("pg_status") or {}
        pg: object = status.get("0") or next(iter(status.values()), {})
    except (ValueError, AttributeError, StopIteration, RecursionError):  # RecursionError: nested too deep
        return None
    if not isinstance(pg, dict):
        return None
    fields: dict[str, Any] = pg  # torch's JSON: each value is converted, and checked, by seq()

    def seq(key: str) -> int | None:
        try:
            value = int(fields[key])
        except (KeyError, TypeError, ValueError):
            return None
        return value if value >= 0 else None

    entries = [e for e in data.get("entries") or () if isinstance(e, dict) and not e.get("is_p2p")]
    op = str(entries[-1].get("profiling_name") or "") or None if entries else None
    return FlightRecord(seq("last_enqueued_collective"), seq("last_completed_collective"), op)
