"""A run's live data for the run view, gathered in a process of its own (cockpit.tui.models.feed_process).

The UI's half: ``RunFeed.run()`` starts the feed process and blocks reading its frames (a textual thread
worker calls it; the read waits without the GIL). Each frame is one batch, merged into the one waiting to be
drained, and ``notify()`` is called once, not again until the UI has called ``drain()``; ``drain()`` also
asks the feed for the next batch. So the UI gets one wake-up per frame it can handle, and at most one batch
is in flight however fast the ranks write.

A view switch (``set_view``) is a request: the feed answers with that view's stored lines as a batch with
``reset``; batches of the view the UI left are dropped. Once the run is final and its last batch is read,
``run()`` returns; a later ``set_view`` says that a reader must be started again for its answer.

The feed process is stopped with ``stop()`` (its stdin closed, then SIGTERM by pid), and exits by itself when
the UI dies. No textual here.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

import cockpit
from cockpit.tui.models.feed_process import MORE, decode, read_frame, view_request
from cockpit.tui.models.feed_state import SCAN_SLICE, Drained, LiveEvent, SourceStats
from cockpit.tui.models.log_filter import LineFilter

__all__ = ["Drained", "LiveEvent", "RunFeed", "SourceStats"]

PIPE_SIZE = 1 << 20  # a whole batch fits in the pipe: the feed writes it in one go, the UI reads it in one


class RunFeed:
    def __init__(self, run_dir: Path, notify: Callable[[], object], max_lines: int = 10_000,
                 parse_budget: float = 0.15, scan_slice: float = SCAN_SLICE):
        self.run_dir = Path(run_dir)
        self._notify = notify
        self.max_lines = max_lines
        self.parse_budget, self.scan_slice = parse_budget, scan_slice
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._errors: IO[bytes] | None = None  # the feed process's stderr (a temporary file)
        self._pending: Drained | None = None
        self._posted = False
        self._gen = 0  # the view request last sent
        self._seen_gen = 0  # the view request last answered
        self._drained_gen = 0  # the view request whose answer the UI last drained
        self._view_request = b""
        self._reading = False
        self._stopped = False
        self.skipped = 0

    @property
    def gen(self) -> int:
        """The last view request: batches that answer it carry it as ``view_gen``."""
        return self._gen

    @property
    def answer_waiting(self) -> bool:
        """The answer to the last view request came and is not drained yet (the UI applies it at once)."""
        with self._lock:
            p = self._pending
            return p is not None and p.view_gen == self._gen != self._drained_gen

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    # --- the reader thread ---------------------------------------------------------------------------------
    def run(self) -> None:
        """Read the feed's batches until the run is final and every view request is answered, or ``stop()``
        (blocks; call it in a worker thread). Starts the feed process on the first call."""
        with self._lock:
            if self._reading or self._stopped:
                return
            self._reading = True
            if self._proc is None:
                self._proc = self._start()
        stream = self._proc.stdout
        while True:
            body = read_frame(stream)
            if body is None:
                self._lost()
                return
            d = decode(body)
            with self._lock:
                self._merge(d)
                self._seen_gen = max(self._seen_gen, d.view_gen)
                done = d.finished and self._seen_gen >= self._gen
                if done:
                    self._reading = False
            self._wake()
            if done:
                return

    def _start(self) -> subprocess.Popen:
        # the child imports this cockpit, wherever it was imported from (a worktree, a test's checkout)
        root = str(Path(cockpit.__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        errors = self._errors = tempfile.TemporaryFile()  # noqa: SIM115 (read and closed in _lost)
        argv = [sys.executable, "-m", "cockpit.tui.models.feed_process", str(self.run_dir),
                "--parent", str(os.getpid()), "--max-lines", str(self.max_lines),
                "--parse-budget", str(self.parse_budget), "--scan-slice", str(self.scan_slice)]
        # a session of its own: the terminal's signals are for the UI, which then closes the pipe
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
                                env=env, start_new_session=True)
        stdout = proc.stdout
        with contextlib.suppress(OSError):  # an older kernel or a capped pipe-max-size: 64 KB pipes work too
            if stdout is not None:  # always: stdout=PIPE
                fcntl.fcntl(stdout.fileno(), fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        if self._gen:  # a view was chosen before the process existed
            self._send(self._view_request)
        return proc

    def _merge(self, d: Drained) -> None:
        """Fold a batch into the one waiting for the UI (under the lock)."""
        self.skipped = d.skipped
        p = self._pending
        if p is None:
            self._pending = d
            return
        if d.reset or d.view_gen != p.view_gen:
            p.lines, p.reset, p.view_gen = d.lines, d.reset, d.view_gen
        else:
            p.lines += d.lines
            if len(p.lines) > self.max_lines:
                p.lines, p.reset = p.lines[-self.max_lines:], True
        p.status = d.status or p.status
        p.events += d.events
        p.stats.update(d.stats)  # the sources that changed: the counts of both batches, the newer winning
        p.finished, p.skipped, p.lines_per_s = d.finished, d.skipped, d.lines_per_s

    def _lost(self) -> None:
        """The feed process's output ended: a stop, or it failed (then say what it printed)."""
        proc, errors = self._proc, self._errors
        if proc is None or errors is None:  # never: the output that ended was proc's
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        error = None
        if not self._stopped and proc.returncode not in (0, None):
            errors.seek(0)
            said = errors.read()[-2000:].decode(errors="replace").strip()
            error = f"the log feed process exited with {proc.returncode}: {said or 'no message'}"
        with self._lock:
            self._reading = False
            if error is not None:
                self._pending = self._pending or Drained([], False, None, [], {}, True, self.skipped)
                self._pending.error, self._pending.finished = error, True
        self._wake()

    def _wake(self) -> None:
        with self._lock:
            if self._posted or self._pending is None:
                return
            self._posted = True
        self._notify()

    # --- the UI thread --------------------------------------------------------------------------------------
    def drain(self) -> Drained | None:
        """The batch waiting (None: nothing, or only lines of a view the UI left); asks for the next one."""
        with self._lock:
            d, self._pending = self._pending, None
            self._posted = False
            if d is not None and d.view_gen != self._gen:
                d.lines, d.reset = [], False  # an answer for a view the UI has left
            elif d is not None:
                self._drained_gen = d.view_gen
        self._send(MORE)
        return d

    def set_view(self, view: tuple | None, line_filter: LineFilter) -> bool:
        """Ask for ``view`` (a source, or MERGED) through ``line_filter``: its lines come in a batch with
        ``reset``. True when no reader is running: the caller starts one (``run`` in a worker) for the answer."""
        with self._lock:
            self._gen += 1
            self._view_request = view_request(self._gen, view, line_filter)
            start_reader = not self._reading and not self._stopped
        self._send(self._view_request)
        return start_reader

    def _send(self, data: bytes) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or self._stopped:
            return
        with contextlib.suppress(BrokenPipeError, ValueError):  # the feed is gone: the reader reports why
            proc.stdin.write(data)
            proc.stdin.flush()

    def stop(self) -> None:
        """End the feed process (from any thread): close its stdin, then SIGTERM by pid; ``run`` returns."""
        with self._lock:
            self._stopped = True
            proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(BrokenPipeError, OSError):
            if proc.stdin is not None:  # always: stdin=PIPE
                proc.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        if not self._reading:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=2)

