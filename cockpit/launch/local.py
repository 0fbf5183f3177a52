"""The local launcher: one machine, GPUs or CPU. Prepares the run directory, then hands the run to a
detached supervisor (cockpit.launch.supervisor) and returns; watching is the caller's business."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from cockpit import contract, procs
from cockpit.launch.plan import LaunchError, facts_for
from cockpit.render import default_kind, render
from cockpit.runs import RunStatus, create_run_dir, first_failure, new_run_id, rank_exits, write_status
from cockpit.spec import JobSpec


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick). Another process could take it before torchrun
    binds it; torchrun then fails with 'address already in use', which the summary reports."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def prepare(spec: JobSpec, job_path: str, runs_dir: Path, extra_args: tuple[str, ...] = ()) -> Path:
    """Create the run directory with the job copy, the rendered node script and a `starting` status."""
    if spec.master_port is not None and not port_is_free(spec.master_port):
        raise LaunchError(f"master_port {spec.master_port} is already in use on this machine "
                          "(hint: master_port: auto, or stop what listens there)")
    run_id = new_run_id(spec.name)
    run_dir = create_run_dir(runs_dir, run_id)
    (run_dir / "job.yaml").write_text(Path(job_path).read_text(encoding="utf-8"), encoding="utf-8")
    if spec.sweep is not None:  # trials side by side on disjoint GPU sets (cockpit.launch.local_sweep)
        from cockpit.launch import local_sweep

        try:
            write_status(run_dir, local_sweep.prepare(spec, job_path, run_dir, run_id, extra_args, free_port))
        except LaunchError:
            shutil.rmtree(run_dir)
            raise
        return run_dir
    facts = facts_for(spec, job_path, str(run_dir.resolve()), run_id, spec.master_port or free_port(),
                      extra_args)
    script = run_dir / "commands" / "node-0.sh"
    script.write_text(render(spec, facts, default_kind(spec), 0 if default_kind(spec) != "dp" else None))
    status = RunStatus(run_id=run_id, name=spec.name, launcher=spec.launcher,
                       job_file=str(Path(job_path).resolve()), hosts=list(facts.node_names),
                       world_size=spec.world_size,
                       stall_after=spec.stall_after, on_stall=spec.on_stall)
    write_status(run_dir, status)
    return run_dir


def start(run_dir: Path, grace: float = 10.0) -> int:
    """Start the detached supervisor; returns its pid."""
    env = {k: v for k, v in os.environ.items() if k not in contract.ALL}
    with open(run_dir / "logs" / "supervisor.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "cockpit.launch.supervisor", str(run_dir),
                                 "--grace", str(grace)], stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, env=env)
    return proc.pid


def supervisor_alive(status: RunStatus) -> bool:
    sup = status.supervisor
    return bool(sup) and procs.is_alive(sup["pid"], sup.get("start"))


def request_stop(status: RunStatus) -> bool:
    """Ask the run's supervisor to stop the run; False if there is no live supervisor to ask."""
    if not supervisor_alive(status):
        return False
    os.kill(status.supervisor["pid"], signal.SIGTERM)
    return True


def reconcile(run_dir: Path, status: RunStatus, started_within: float = 30.0) -> RunStatus:
    """Fix the state of a run whose supervisor died (killed, machine rebooted) while nobody watched.

    A run still `starting` within ``started_within`` seconds of creation is left alone (its supervisor may
    not have written its pid yet)."""
    if status.final or supervisor_alive(status):
        return status
    if status.supervisor is None and time.time() - status.created < started_within:
        return status
    if procs.run_pids(status.run_id):
        status.note = "the supervisor is gone but processes of the run are still alive (cockpit stop ends them)"
        return status
    exits = rank_exits(run_dir)
    first = first_failure(exits)
    complete = status.world_size is not None and len(exits) >= status.world_size
    if first is not None:
        status.state, status.exit_code = "failed", 1
        status.first_failure = {"rank": first.rank, "host": first.host, "status": first.status,
                                "signal": first.signal, "time": first.time, "describe": first.describe()}
    elif complete:
        status.state, status.exit_code = "succeeded", 0
    else:
        status.state = "lost"
    status.ranks = {str(r): {"rank": e.rank, "host": e.host, "status": e.status, "signal": e.signal,
                             "time": e.time} for r, e in sorted(exits.items())}
    status.ended = max((e.time for e in exits.values()), default=time.time())
    status.note = "the supervisor died; state worked out from the ranks' exit records"
    write_status(run_dir, status)
    return status
