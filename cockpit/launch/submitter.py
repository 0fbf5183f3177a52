"""The cockpit process that hands a run to its scheduler (sbatch), as status.json's ``submitter`` names it, and
whether it is gone.

Between the run directory being made and sbatch's answer, no supervisor exists yet: the submitting cockpit is
the only one that can record what became of the run. The SIGINT/SIGTERM/SIGHUP it gets while sbatch waits are
handled (cockpit.launch.slurm.job.submit records the run ``unsubmitted``); a SIGKILL, the OOM killer or a reboot
are not, and without this record such a run would read ``starting`` for ever.

A pid alone names no process for long (pids are reused): the record holds the pid's start time from /proc, the
host and the boot id. A submitter on another host (a runs directory shared by two login nodes) cannot be looked
at from here: ``gone`` says None (cannot tell), and the caller falls back to the time sbatch is given.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping

BOOT_ID = "/proc/sys/kernel/random/boot_id"


def boot_id() -> str | None:
    """This boot's id (a new one at every boot), None where /proc does not say."""
    try:
        with open(BOOT_ID, encoding="ascii") as f:
            return f.read().strip() or None
    except OSError:
        return None


def this_process() -> dict[str, object]:
    """status.json's ``submitter`` for the calling process."""
    from cockpit.launch import procs

    pid = os.getpid()
    return {"pid": pid, "start": procs.start_time(pid), "host": socket.gethostname(), "boot": boot_id()}


def verdict(record: Mapping[str, object], host: str, boot: str | None,
            alive: Callable[[int, str | None], bool]) -> bool | None:
    """Pure: True where the recorded submitter is certainly gone, False where it still runs, None where this
    host cannot tell (another host's process, or a record that names no pid). ``alive(pid, start)``: /proc's
    answer on this host."""
    pid, start = record.get("pid"), record.get("start")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or record.get("host") != host:
        return None
    recorded_boot = record.get("boot")
    if isinstance(recorded_boot, str) and boot is not None and recorded_boot != boot:
        return True  # this machine rebooted since: no process of that boot runs
    return not alive(pid, start if isinstance(start, str) else None)


def gone(record: Mapping[str, object] | None) -> bool | None:
    """``verdict`` for this host, now; None for no record."""
    if record is None:
        return None
    from cockpit.launch import procs

    return verdict(record, socket.gethostname(), boot_id(), procs.is_alive)
