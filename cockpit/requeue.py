"""Stop requests and Slurm self-requeue for any training script: stdlib only, so a plain script (no
cockpit.train, no torch import here) can checkpoint before its time limit and come back::

    import cockpit.requeue

    stop = cockpit.requeue.watch()          # SIGUSR1 / SIGTERM now only set a flag
    for step in range(start, steps):
        train_one_step()
        if stop.requested:                  # under DDP: agree first, see the README ("Requeue")
            save_checkpoint()
            stop.requeue_or_exit()          # scontrol requeue (rank 0, when asked for), then exit 0

What arrives when: with ``slurm.requeue: true`` Slurm sends SIGUSR1 to the batch shell ``signal_seconds``
before the time limit; cockpit's sbatch script passes it to srun, which passes it to every task, whose rank
wrapper passes it to the rank. At the limit itself Slurm sends SIGTERM, then SIGKILL after KillWait.
``cockpit stop`` sends SIGTERM too. ``COCKPIT_REQUEUE=1`` means the job may put itself back in the queue; it
is ``scontrol requeue``, run here by rank 0 only, that does it; the next start is a new run of the script
(``SLURM_RESTART_COUNT`` counts them), which must resume from its own checkpoint.

A signal handler only sets a flag: saving inside a handler could interrupt a collective or a half-written
tensor. A second signal does not force an exit either: SIGTERM at the limit may arrive while the checkpoint
from the earlier SIGUSR1 is being written.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import NoReturn

from cockpit import contract

STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)


class StopRequest:
    """Remembers the first stop signal this process received."""

    def __init__(self) -> None:
        self.signal_name: str | None = None

    @property
    def requested(self) -> bool:
        """True once a stop signal arrived (on this rank: ranks must agree, see the module docstring)."""
        return self.signal_name is not None

    def install(self, signals: Sequence[signal.Signals] = STOP_SIGNALS) -> None:
        """Handle ``signals`` by setting the flag (main thread only, as Python requires)."""
        for sig in signals:
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signal_name is None:  # keep the first; printing here could re-enter a busy stdout
            self.signal_name = signal.Signals(signum).name


class Stop(StopRequest):
    """What ``watch()`` returns: the flag, whether a requeue will happen, and the way out."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self._env = os.environ if env is None else env

    @property
    def will_requeue(self) -> bool:
        """True when this rank would run ``scontrol requeue``: rank 0 of a Slurm job with COCKPIT_REQUEUE=1."""
        return requeue_job_id(self._env) is not None and is_main_rank(self._env)

    def requeue_or_exit(self) -> NoReturn:
        """End the process once the script has saved its checkpoint: rank 0 requeues the job when asked for
        (COCKPIT_REQUEUE=1 and a Slurm job id), every rank says what happened, and the process exits 0 (the
        work is safe), or 1 when the requeue failed (rerunning resumes all the same). It exits at once, as
        cockpit.train does (os._exit after flushing: gloo in torch 2.x can abort in interpreter teardown),
        so call ``dist.destroy_process_group()`` and finish your own logging first."""
        why = f"stop requested ({self.signal_name or 'on another rank'})"
        code = 0
        if not self.will_requeue:
            print(f"[cockpit] {why}; {_no_requeue_reason(self._env)}", flush=True)
        else:
            ok, message = requeue(requeue_job_id(self._env) or "")
            print(f"[cockpit] {why}; {message}", flush=True, file=sys.stdout if ok else sys.stderr)
            code = 0 if ok else 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def watch(signals: Sequence[signal.Signals] = STOP_SIGNALS) -> Stop:
    """Start watching for stop signals (SIGUSR1 and SIGTERM by default); call once, from the main thread,
    before training. Replaces those signals' handlers: a stop becomes a flag the loop reads."""
    stop = Stop()
    stop.install(signals)
    return stop


def is_main_rank(env: Mapping[str, str]) -> bool:
    """Rank 0, or a single process (no RANK / SLURM_PROCID in the environment)."""
    return (env.get("RANK") or env.get("SLURM_PROCID") or "0").strip() == "0"


def requeue_job_id(env: Mapping[str, str]) -> str | None:
    """The id ``scontrol requeue`` takes when the job asked for requeue (COCKPIT_REQUEUE=1), else None:
    "<array job id>_<task id>" inside an array, else SLURM_JOB_ID."""
    if env.get(contract.REQUEUE, "0").strip() != "1":
        return None
    array_job, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    if array_job and task:
        return f"{array_job}_{task}"
    return env.get("SLURM_JOB_ID") or None


def _no_requeue_reason(env: Mapping[str, str]) -> str:
    if env.get(contract.REQUEUE, "0").strip() != "1":
        return f"not requeued: {contract.REQUEUE} is not 1 (set slurm.requeue: true)"
    if requeue_job_id(env) is None:
        return "not requeued: no SLURM_JOB_ID (not a Slurm job)"
    return "rank 0 requeues the job"


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
