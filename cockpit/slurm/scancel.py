"""scancel through an injected runner: cancel jobs, or signal every process of their steps."""

from __future__ import annotations

from cockpit.slurm.command import RunCommand, SlurmError, run_command


def cancel(ids: list[str], runner: RunCommand = run_command) -> None:
    """``scancel`` the jobs (array tasks as "<array>_<task>", or the array as a whole by its id)."""
    if not ids:
        return
    r = runner(["scancel", *ids])
    if r.returncode != 0:
        raise SlurmError(f"scancel {' '.join(ids)} exited {r.returncode}: {r.stderr.strip()}")


def signal_steps(ids: list[str], sig: str, runner: RunCommand = run_command) -> None:
    """``scancel --signal=SIG``: slurmstepd delivers it to every process of the jobs' steps (not the batch
    shell). Raises SlurmError."""
    r = runner(["scancel", f"--signal={sig}", *ids])
    if r.returncode != 0:
        raise SlurmError(f"scancel --signal={sig} {' '.join(ids)} exited {r.returncode}: {r.stderr.strip()}")
