"""Stop requests (SIGUSR1 from Slurm's ``--signal=B:USR1@N``, SIGTERM) and Slurm self-requeue.

A signal handler only sets a flag: checkpointing inside a handler could interrupt a collective or a
half-written tensor. The runtime looks at the flag at each step boundary, where all ranks agree on it with
one all-reduce (a rank that got no signal stops too), save a checkpoint and exit.

A second signal does not force an exit: Slurm sends SIGTERM at the time limit, possibly while the
checkpoint from its earlier SIGUSR1 is being written. A rank stuck in a collective therefore ignores
SIGTERM; torchrun escalates to SIGKILL after its shutdown timeout (30 s by default), Slurm after KillWait.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Sequence
from types import FrameType

STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)


class StopRequest:
    """Remembers the first stop signal this process received."""

    def __init__(self) -> None:
        self.signal_name: str | None = None

    @property
    def requested(self) -> bool:
        """True once a stop signal arrived."""
        return self.signal_name is not None

    def install(self, signals: Sequence[signal.Signals] = STOP_SIGNALS) -> None:
        """Handle ``signals`` by setting the flag (main thread only, as Python requires)."""
        for sig in signals:
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signal_name is None:  # keep the first; printing here could re-enter a busy stdout
            self.signal_name = signal.Signals(signum).name


def requeue_command(job_id: str) -> list[str]:
    """The command that puts a Slurm job (or one array task, "<job>_<task>") back in the queue."""
    return ["scontrol", "requeue", job_id]


def requeue(job_id: str, timeout_s: float = 60.0) -> tuple[bool, str]:
    """Run ``scontrol requeue <job_id>``; (ok, message) and never raises, the caller reports it."""
    cmd = requeue_command(job_id)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"`{' '.join(cmd)}` failed: {exc}; hint: is scontrol on PATH on the compute node?"
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip()
        return False, (f"`{' '.join(cmd)}` exited {done.returncode}: {detail}; "
                       "hint: the job needs --requeue (or JobRequeue=1 in slurm.conf)")
    return True, f"requeued Slurm job {job_id}"
