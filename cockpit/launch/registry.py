"""The registry of launchers: the one place that maps a job's ``launcher:`` (or a run's status.json) to the
object that launches, supervises, stops and recovers it (cockpit.launch.protocol).

Each entry imports its launcher when asked: the supervisor and `cockpit ps` must not pay for asyncssh
(ssh) or the Slurm queries when no run of theirs is involved. A local job with ``sweep:`` gets the local
sweep variant; so does a local run whose nodes are trials.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cockpit.launch.site import LaunchError

if TYPE_CHECKING:  # `cockpit validate` / `render` ask a launcher without loading what a run is (cockpit.run)
    from cockpit.launch.protocol import Launcher
    from cockpit.run.store import RunStatus
    from cockpit.spec.model import JobSpec


def _local() -> Launcher:
    from cockpit.launch.local.launcher import LocalLauncher

    return LocalLauncher()


def _local_sweep() -> Launcher:
    from cockpit.launch.local.sweep import LocalSweepLauncher

    return LocalSweepLauncher()


def _slurm() -> Launcher:
    from cockpit.launch.slurm.launcher import SlurmLauncher

    return SlurmLauncher()


def _ssh() -> Launcher:
    from cockpit.launch.ssh.launcher import SSHLauncher

    return SSHLauncher()


LAUNCHERS: dict[str, Callable[[], Launcher]] = {"local": _local, "local-sweep": _local_sweep,
                                                "slurm": _slurm, "ssh": _ssh}
SWEEP_VARIANTS = {"local": "local-sweep"}  # Slurm sweeps are job arrays: the Slurm launcher's own business


def get(key: str) -> Launcher:
    """The launcher registered as ``key``; LaunchError if this version has none."""
    factory = LAUNCHERS.get(key)
    if factory is None:
        raise LaunchError(f"launcher {key} is not available in this version "
                          "(hint: cockpit render shows the commands it would run)")
    return factory()


def for_spec(spec: JobSpec) -> Launcher:
    """The launcher of a job file."""
    return get(SWEEP_VARIANTS.get(spec.launcher, spec.launcher) if spec.sweep is not None else spec.launcher)


def known_for_run(status: RunStatus) -> Launcher | None:
    """The launcher of a run; None when this version has none of its name (a newer cockpit's run): each
    caller says what such a run gets."""
    try:
        return for_run(status)
    except LaunchError:
        return None


def for_run(status: RunStatus, fallback: str | None = None) -> Launcher:
    """The launcher of a run from its status.json. ``fallback``: the launcher for a name this version does
    not know (cockpit ps / stop treat such a run as a local one: its processes are found here by run id);
    None: LaunchError."""
    from cockpit.run.store import is_sweep

    key = status.launcher
    if key in SWEEP_VARIANTS and is_sweep(status):
        key = SWEEP_VARIANTS[key]
    if key not in LAUNCHERS and fallback is not None:
        key = fallback
    return get(key)
