"""What the TUI needs from the world, in one place, so that tests and snapshots inject fixed values instead
of patching: where runs live, where the fleet data comes from, the clock, and the facts a preview shows.
No textual."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.render.site import Site

if TYPE_CHECKING:
    from cockpit.insight import proposals
    from cockpit.tui.models.fleet_feed import FleetFeed


def _same(facts: Site) -> Site:
    return facts


def default_requeue() -> Callable[[Path], object] | None:
    """Requeue a run by its launcher (cockpit.launch.protocol ``requeue``); the run view offers it where the
    run's launcher can (``can_requeue``). A context built without it (tests) never offers it."""
    return requeue_run


def requeue_run(run_dir: Path) -> str:
    from cockpit.launch import registry
    from cockpit.launch.site import LaunchError
    from cockpit.run.store import read_status

    status = read_status(run_dir)
    if status is None:
        raise LaunchError(f"{run_dir}: no readable status.json")
    return registry.for_run(status).requeue(run_dir)


def default_user_jobs() -> Callable[[], list] | None:
    """Every Slurm job of the user (cockpit.slurm.jobs, one squeue call plus the cluster's history) where
    squeue is installed; None elsewhere, and the Runs screen shows runs only. Raises SlurmError when called
    and Slurm does not answer."""
    import getpass
    import shutil

    if shutil.which("squeue") is None:
        return None

    def user_jobs() -> list:
        from cockpit.slurm.jobs import list_jobs
        from cockpit.slurm.query import read_history

        return list_jobs(read_history(), getpass.getuser())
    return user_jobs


def default_partitions() -> list[str]:
    """Slurm's partitions where sinfo is installed and answers; [] elsewhere."""
    from cockpit.fleet.probes import NodesError, slurm_nodes

    try:
        return sorted({n.partition for n in slurm_nodes()})
    except (NodesError, OSError, subprocess.TimeoutExpired):
        return []


def default_relaunch(job: Path, runs_dir: Path) -> Path:
    """Launch a job file as `cockpit run` does (prepare, then start); the new run's directory."""
    from cockpit import launch
    from cockpit.spec.model import load_spec

    run_dir = launch.prepare(load_spec(job), str(job), runs_dir)
    launch.start(run_dir)
    return run_dir


def default_fix_facts(run_dir: Path) -> proposals.FixContext:
    """What the fix review's proposals may depend on (cockpit.insight.fixes.local_facts: a local run's interfaces)."""
    from cockpit.insight.fixes import local_facts
    from cockpit.run.handle import Run

    return local_facts(Run.load(run_dir))


@dataclass
class Context:
    runs_dir: Path
    fleet: FleetFeed  # a feed: cockpit.tui.models.fleet_feed.LiveFleet or FixedFleet
    job: Path | None = None  # job file to open in Compose at start
    run: Path | None = None  # run directory to open at start
    base_dir: Path = field(default_factory=Path.cwd)  # where a new job's relative paths resolve
    config_path: Path | None = None  # None: $XDG_CONFIG_HOME/cockpit/tui.yaml
    theme_dirs: list[Path] | None = None  # None: themes/ and $XDG_CONFIG_HOME/cockpit/themes
    theme: str | None = None  # overrides the remembered theme for this session
    clock: Callable[[], float] = time.time
    facts: Callable[[Site], Site] = _same  # applied to dry-run facts before a preview renders
    partitions: Callable[[], list[str]] = default_partitions
    requeue: Callable[[Path], object] | None = None
    relaunch: Callable[[Path, Path], Path] = default_relaunch  # (job file, runs dir) -> the new run's directory
    fix_facts: Callable[[Path], proposals.FixContext] = default_fix_facts  # run dir -> what the fixes may use
    user_jobs: Callable[[], list] | None = None  # the Runs screen's Slurm jobs (default_user_jobs); None: none
    runs_every: float = 2.0  # seconds between runs-list refreshes
    stop_grace: float = 10.0
    max_lines: int = 10_000  # per rank, and for the merged view
    parse_budget: float = 0.15  # seconds a second the live log scan may take (see run_feed); inf: all lines
    scan_slice: float = 0.005  # seconds of scanning per batch at most
