"""Stop requests (SIGUSR1 from Slurm's ``--signal=B:USR1@N``, SIGTERM) and Slurm self-requeue, for the runtime.

They live in cockpit.requeue (stdlib only), so that a script without cockpit.train can use the same flag and
the same ``scontrol requeue``; the runtime agrees on the flag across ranks at each step boundary with one
all-reduce (a rank that got no signal stops too), saves a checkpoint and exits (see cockpit.train.runtime).
"""

from __future__ import annotations

from cockpit.requeue import STOP_SIGNALS, StopRequest, requeue, requeue_command

__all__ = ["STOP_SIGNALS", "StopRequest", "requeue", "requeue_command"]
