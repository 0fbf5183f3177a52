"""Ctrl-C while `cockpit run` is still starting its run.

Before the run directory exists (loading, the preflight), Ctrl-C ends `cockpit run` at once: nothing was
made, nothing runs. From the moment the directory exists until the follower's own handler is in place (the
rest of the launch: the run's files, sbatch, the detached supervisor), a press is held instead: raised there,
it would leave a run made or started that nobody names (seen: two presses in the first second exited 130
with no run id while the run went on to train). Once the run has started, the held presses count as they
would have (cockpit.cli.follow): one says where the run is, its id and how to stop it; two stop it.

Presses are counted through a signal wakeup pipe, a byte per signal, so two presses are two even when the
interpreter runs its handler only once for both (two signals sent before the process runs at all are one to
the kernel: one press). A held press raises nothing in the launch; the first one is answered at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

HELD = (b"cockpit: Ctrl-C while the run is being started: held until it has started (then one press says "
        b"where it is, two stop it)\n")


class StartGuard:
    """SIGINT while a run of job ``name`` is started in ``runs_dir``: raised (KeyboardInterrupt) until a new
    run directory of that job exists there, held and counted from then on (``take``)."""

    def __init__(self, runs_dir: Path, name: str):
        self.runs_dir, self.prefix = runs_dir, f"{name}-"
        self.before = self._runs()
        self._read, self._write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._old_handler: Callable[[int, FrameType | None], Any] | int | None = None  # signal.signal's
        self._old_wakeup = -1
        self._answered = False

    def __enter__(self) -> StartGuard:
        self._old_wakeup = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._old_handler = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc) -> None:
        if signal.getsignal(signal.SIGINT) == self._on_sigint:  # the follower's loop may have replaced both
            signal.signal(signal.SIGINT, self._old_handler)
            signal.set_wakeup_fd(self._old_wakeup)
        os.close(self._read)
        os.close(self._write)

    def made(self) -> bool:
        """Whether a run directory of this job appeared since the guard was made."""
        return bool(self._runs() - self.before)

    def take(self) -> int:
        """The presses held so far (each counted once)."""
        count = 0
        while True:
            try:
                data = os.read(self._read, 4096)
            except BlockingIOError:
                return count
            if not data:
                return count
            count += data.count(bytes([signal.SIGINT]))

    def _on_sigint(self, signum, frame) -> None:
        if not self.made():
            raise KeyboardInterrupt
        if not self._answered:  # held (the wakeup pipe counted it); said with one write, safe in a handler
            self._answered = True
            with contextlib.suppress(OSError):
                os.write(2, HELD)

    def _runs(self) -> set[str]:
        try:
            return {name for name in os.listdir(self.runs_dir) if name.startswith(self.prefix)}
        except OSError:  # not made yet (the launch makes it), or unreadable (the launch says so)
            return set()
