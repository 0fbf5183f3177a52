"""Waiting on a Slurm client that is slow to answer (a busy or unreachable slurmctld: sinfo and sbatch retry for a
minute or more before they give up): one line on stderr that says what cockpit waits for once the wait has lasted
``SAY_AFTER`` seconds, and the signals that end cockpit turned into an exception for that wait only, so that the
caller can record what became of the run before cockpit exits."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator

SAY_AFTER = 2.0  # seconds: an answer within this is no wait worth a line
ENDING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(Exception):
    """A signal that ends cockpit arrived while it waited."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _stderr(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr, flush=True)


@contextlib.contextmanager
def said_after(what: str, after: float = SAY_AFTER, say: Callable[[str], None] = _stderr) -> Iterator[None]:
    """Say ``cockpit: waiting for WHAT`` once, if the block still runs ``after`` seconds on."""
    timer = threading.Timer(after, say, (f"cockpit: waiting for {what}",))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise Interrupted in the block (the main thread only: elsewhere signals cannot be
    handled, and the block runs as it is); the handlers before it are put back after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_it(signum: int, _frame: object) -> None:
        raise Interrupted(signum)

    before = {sig: signal.signal(sig, raise_it) for sig in ENDING}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
