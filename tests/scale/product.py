"""Every piece of cockpit the scale harness calls directly, in one place: the restructuring of issue 28 moves
modules (cockpit/runs.py -> cockpit/run/store.py, ...), and this file is then the one to follow them.

Everything else of the harness talks to cockpit as a user does (its commands, its files) or starts its real
processes (the supervisor, the TUI). What is called here is what `cockpit run` itself calls, minus its
follower: load the job, ``prepare`` (run directory, rendered node scripts, status.json), ``start`` (the
detached supervisor); and for a run of many simulated hosts (harness.widen) the status and private-file
writers the launchers use.
"""

from __future__ import annotations

from pathlib import Path


def prepare(job: Path, runs: Path, *, preflight: bool = True) -> Path:
    """The run directory of ``job``, as `cockpit run` makes it (cockpit.launch.prepare)."""
    from cockpit import launch
    from cockpit.spec.model import load_spec

    return launch.prepare(load_spec(str(job)), str(job), runs, preflight=preflight)


def start(run_dir: Path, grace: float = 10.0) -> int:
    """The run's detached supervisor, as `cockpit run` starts it; its pid."""
    from cockpit import launch

    return launch.start(run_dir, grace=grace)


def node_script(run_dir: Path, node_rank: int) -> Path:
    from cockpit.run import layout as run_layout

    return run_layout.node_script(run_dir, node_rank)


def write_private(path: Path, text: str) -> None:
    from cockpit.run.store import write_private as write

    write(path, text)


def set_hosts(run_dir: Path, hosts: list[str], world_size: int) -> None:
    """status.json with these hosts and world size, written as the launchers write it."""
    from cockpit.run.store import read_status, write_status

    status = read_status(run_dir)
    if status is None:
        raise RuntimeError(f"{run_dir}: no readable status.json to widen")
    status.hosts, status.world_size = list(hosts), world_size
    write_status(run_dir, status)
