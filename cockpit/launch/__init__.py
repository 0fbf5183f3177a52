"""Launchers: turn a job into a run directory, then hand the run to its supervisor.

Every launcher has the same steps, so `cockpit run`, the TUI and tests treat them alike:

    run_dir = prepare(spec, job_path, runs_dir, extra_args)   # run directory, rendered commands, status;
                                                              # handed to its scheduler where it has one (sbatch)
    start(run_dir)                                            # the detached supervisor (launch.supervisor)

Each launcher (local and its sweep variant, ssh, slurm) is a package here (local/, ssh/, slurm/) that implements
cockpit.launch.protocol.Launcher and is found through cockpit.launch.registry; outside its own package only the
registry names it, and no service or face tests a launcher's name (tests/test_launcher_seam.py). The shared
modules: protocol, registry, site (the render site; LaunchError), supervision (the supervisor seen from
outside), supervisor, control (stop), rerun (a sweep's failed trials), procs. The supervisor asks the run's
launcher for one unit of work (a local torchrun, a Slurm job, ...: slurm/unit.py, ssh/unit.py) with poll() /
terminate() / describe() / kill()."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.launch import registry
from cockpit.launch.site import DEFAULT_MASTER_PORT, DRY_RUN_ID, Ended, LaunchError, dry_run_dir

if TYPE_CHECKING:
    from cockpit.render.site import Site
    from cockpit.spec.model import JobSpec

__all__ = ["Ended", "LaunchError", "dry_run_facts", "prepare", "start", "with_shell_env"]


def with_shell_env(spec: JobSpec, environ: Mapping[str, str] | None = None) -> JobSpec:
    """The job as its launcher would run it from this shell (the ssh launcher adds the shell's NCCL_*/GLOO_*
    variables: what `cockpit run` checks and exports, what `cockpit render` and doctor show)."""
    return registry.for_spec(spec).shell_env(spec, environ)


def dry_run_facts(spec: JobSpec, job_path: str, runs_dir: str | None = None) -> Site:
    """The facts `cockpit render` and the compose preview render with: the job's launcher's, with stand-ins for
    what a launch looks up (the run id "dry-run", the job's master port or 29500)."""
    return registry.for_spec(spec).render_facts(spec, job_path, dry_run_dir(runs_dir), DRY_RUN_ID,
                                                spec.master_port or DEFAULT_MASTER_PORT)


def prepare(spec: JobSpec, job_path: str, runs_dir: Path, extra_args: tuple[str, ...] = (), *,
            preflight: bool = True, trust_new_hosts: bool = False) -> Path:
    """Create the run directory for ``spec`` and hand it to its scheduler if it has one (sbatch); raises
    LaunchError with a hint when it cannot run. ``preflight`` False launches although checks fail
    (`cockpit run --no-preflight`); ``trust_new_hosts`` concerns the ssh launcher only (`--trust-new-hosts`)."""
    from cockpit.launch.protocol import LaunchOptions

    check_runs_dir(runs_dir)
    launcher = registry.for_spec(spec)
    run_dir = launcher.prepare(spec, job_path, runs_dir, extra_args,
                               LaunchOptions(preflight=preflight, trust_new_hosts=trust_new_hosts))
    launcher.schedule(run_dir)
    return run_dir


def check_runs_dir(runs_dir: Path) -> None:
    """Make sure a run directory can be made under ``runs_dir`` (creating it if new); LaunchError if not.

    Tried for real (a directory made and removed): permission bits say nothing for root, a read-only mount or
    a path under /proc; and this way nothing of a launch has happened yet when it fails."""
    try:
        runs_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.rmtree(tempfile.mkdtemp(prefix=".cockpit-probe-", dir=runs_dir))
    except OSError as exc:
        raise LaunchError(f"runs directory {runs_dir}: cannot create a run directory there: "
                          f"{exc.strerror or exc} (hint: pass --runs-dir DIR where you can write, or set "
                          "COCKPIT_RUNS_DIR)") from None


def start(run_dir: Path, grace: float = 10.0) -> int:
    """Start the run's detached supervisor; returns its pid."""
    from cockpit.launch import supervision

    return supervision.start(run_dir, grace)
