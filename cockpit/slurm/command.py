"""How cockpit runs a Slurm client command (squeue, sacct, scontrol, sinfo, scancel): the ``RunCommand`` every
Slurm query takes, so tests and the preflight inject one, the real one (``run_command``), and ``SlurmError``,
whose message says which command failed, why, and what to try."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

RunCommand = Callable[[list[str]], subprocess.CompletedProcess]


class SlurmError(RuntimeError):
    """A Slurm command failed or is missing; the message has the command, its error and a hint."""


def last_words(stderr: str) -> str:
    """What a failed Slurm command said, in one line: its last line (scontrol's "fatal: ..." comes after its
    error lines), or its last error line where the last says nothing of one."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return ""
    errors = [line for line in lines if "fatal" in line or "error" in line]
    return lines[-1] if not errors or lines[-1] in errors else errors[-1]


class SlurmMissing(SlurmError):
    """No Slurm client on this machine at all (the command is not on PATH): not a cluster that failed to answer."""


def run_command(argv: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess:
    """Run a Slurm client command (it finds its cluster through an inherited SLURM_CONF, if any)."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise SlurmMissing(f"{argv[0]} is not installed here (hint: run cockpit on a login node of the cluster)")\
            from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"`{' '.join(argv)}` gave no answer within {timeout:g} s "
                         "(hint: slurmctld may be busy or down: try `scontrol ping`)") from None
