"""What every launcher shares to prepare a run: its errors, the facts for rendering a job (each launcher
gives its own interpreter, master address and node names: cockpit.launch.protocol ``render_facts``), the
shell's NCCL_*/GLOO_* variables for launchers whose ranks do not inherit it, and the job files' checks.

A dry run (`cockpit render`) uses stand-ins where a real launch would look something up (the run id, a free
port), and says so in the run id ("dry-run").
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.fs.paths import default_runs_dir, job_workdir

if TYPE_CHECKING:  # each imported where it is used: `cockpit validate` renders nothing, `render` checks nothing
    from cockpit.launch.protocol import TimeLimits
    from cockpit.preflight.local import LocalFacts
    from cockpit.preflight.script import ScriptScan
    from cockpit.render.site import Site
    from cockpit.run.records import NodeRecord, Trial
    from cockpit.run.store import RunStatus
    from cockpit.spec.model import JobSpec

DRY_RUN_ID = "dry-run"


class LaunchError(Exception):
    """The job cannot be launched as asked; the message says why and what to do."""


class Ended(LaunchError):
    """cockpit itself was ended (Ctrl-C, SIGTERM, SIGHUP) while it waited on the launch (a slow sbatch); the
    run is recorded as not started. ``exit_code``: what the command exits with (128 + the signal's number)."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.exit_code = 128 + signum


class NoScheduler:
    """The answers of a launcher that starts its ranks itself (local, ssh): the job's hosts are its nodes, and
    there is no time limit, no restarted attempt, no sweep of its own and no requeue (cockpit.launch.protocol)."""

    name: str
    replacement_hint = "return it to service"
    resume_instead: str | None = None

    def hosts(self, spec: JobSpec) -> list[str]:
        """The nodes the job file lists (this machine, for a local job)."""
        return list(spec.hosts)

    def time_limits(self, spec: JobSpec | None) -> TimeLimits:
        from cockpit.launch.protocol import TimeLimits

        return TimeLimits()

    def attempt_start(self, run_dir: Path) -> float | None:
        return None

    def rerun_sweep(self, old_dir: Path, new_dir: Path, rename: Callable[[str], str], failed: list[NodeRecord],
                    which: str) -> str:
        raise LaunchError(f"launcher {self.name} has no sweeps")

    def rerun_trial(self, old_tdir: Path, tdir: Path, rename: Callable[[str], str], trial: Trial) -> NodeRecord:
        raise LaunchError(f"launcher {self.name} has no sweeps")

    def can_requeue(self, status: RunStatus) -> bool:
        return False

    def replacement(self, run_dir: Path, status: RunStatus, leave_out: tuple[str, ...]) -> str | None:
        return f"a {self.name} run has no other node to use in its place"

    def relaunch(self, run_dir: Path, status: RunStatus, attempt: int, leave_out: tuple[str, ...]) -> str | None:
        return None  # start() runs the node scripts again


class PreflightFailed(LaunchError):
    """A preflight check failed: the launch is refused with the lines `cockpit doctor JOB` prints for the
    failed checks. ``checks`` are all of them (cockpit.preflight.checks.Check)."""

    def __init__(self, job_path: str, checks: list):
        self.checks = checks
        lines = [c.line() for c in checks if c.level == "FAIL"]
        super().__init__(f"preflight failed, not launching (cockpit doctor {job_path} shows every check; "
                         "--no-preflight launches anyway):\n  " + "\n  ".join(lines))


DEFAULT_MASTER_PORT = 29500
FORWARDED_PREFIXES = ("NCCL_", "GLOO_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # fullmatch: "$" would let a name end in a newline


def forward_shell_env(spec: JobSpec, environ: Mapping[str, str] | None = None) -> JobSpec:
    """The launching shell's NCCL_* / GLOO_* / TORCH_NCCL_* / TORCH_DISTRIBUTED_* variables joined to env: (the
    job's own values win), for a launcher whose ranks do not inherit this shell (cockpit.launch.protocol
    ``shell_env``): `NCCL_DEBUG=INFO cockpit run job.yaml` should mean the same on every launcher."""
    environ = os.environ if environ is None else environ
    own = {k for k, _ in spec.env}
    extra = tuple(sorted((k, v) for k, v in environ.items()
                         if k.startswith(FORWARDED_PREFIXES) and k not in own and _ENV_NAME.fullmatch(k)))
    return replace(spec, env=extra + spec.env) if extra else spec


def interpreter(spec: JobSpec, default: str = "python3") -> str:
    """The Python the ranks use: the job's, else the launcher's ``default`` (python3 on a node; this
    interpreter for a local run)."""
    return spec.python or default


def facts_for(spec: JobSpec, job_path: str, run_dir: str, run_id: str, master_port: int,
              extra_args: tuple[str, ...] = (), *, python: str, master_addr: str,
              node_names: tuple[str, ...]) -> Site:
    """What the renderers need to know about where the job runs; the launcher gives its own ``python``,
    ``master_addr`` and ``node_names`` (cockpit.launch.protocol ``render_facts``)."""
    from cockpit.render.site import Site

    return Site(run_dir=run_dir, run_id=run_id, workdir=job_workdir(job_path, spec.workdir),
                 python=python, master_addr=master_addr, master_port=master_port,
                 node_names=node_names, extra_args=extra_args)


def dry_run_dir(runs_dir: str | None) -> str:
    """The run directory a dry run names: the runs directory's "dry-run", never made."""
    base = Path(runs_dir) if runs_dir else default_runs_dir()
    return str(base.absolute() / DRY_RUN_ID)


def job_files(spec: JobSpec, job_path: str, python: str) -> LocalFacts:
    """What the file checks of a job run from this machine's filesystem need (local, and Slurm's submit host):
    its workdir and script by a stat, ``python`` the interpreter its ranks use. No process is started."""
    from cockpit.preflight.local import LocalFacts

    workdir = job_workdir(job_path, spec.workdir)
    path = Path(workdir) / os.path.expanduser(spec.script) if spec.script is not None else None
    if path is None or not _is_file(path):
        return LocalFacts(workdir, _is_dir(Path(workdir)), False, python, port=spec.master_port)
    return LocalFacts(workdir, _is_dir(Path(workdir)), True, python, port=spec.master_port, script_path=str(path),
                      script_scan=_scan(path))


SCRIPT_READ_MAX = 4 << 20
"""Bytes of a script read for its scan (cockpit.preflight.script): a longer one is not scanned."""


def _scan(path: Path) -> ScriptScan | None:
    """The script's scan (imports, spawn calls), or None where it cannot be read or is longer than
    ``SCRIPT_READ_MAX``. Opened non-blocking and read only if it is a regular file: a FIFO never blocks."""
    import stat

    from cockpit.preflight.script import scan

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(SCRIPT_READ_MAX + 1) if stat.S_ISREG(os.fstat(fd).st_mode) else None
        except OSError:
            return None
    if data is None or len(data) > SCRIPT_READ_MAX:
        return None
    return scan(data.decode("utf-8", "replace"), str(path))


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long for the file system, a loop: not a script the ranks can run
        return False


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False
