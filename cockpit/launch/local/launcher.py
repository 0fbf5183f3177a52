"""The local launcher: one machine, GPUs or CPU. Prepares the run directory, then hands the run to a
detached supervisor (cockpit.launch.supervisor) and returns; watching is the caller's business.

``LocalLauncher`` is its side of cockpit.launch.protocol; a job with ``sweep:`` goes to the local sweep
variant (cockpit.launch.local.sweep), which stops and recovers like this one."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from cockpit import contract
from cockpit.launch import procs
from cockpit.launch.plan import LaunchError, facts_for
from cockpit.launch.protocol import LaunchOptions, Warn
from cockpit.render import default_kind, render
from cockpit.run import layout
from cockpit.run.records import PROCESS_KEYS, NodeRecord
from cockpit.run.store import (
    RunStatus,
    create_run_dir,
    failure_record,
    first_failure,
    new_run_id,
    rank_exits,
    rank_record,
    write_private,
    write_status,
)
from cockpit.spec.model import JobSpec


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


class LocalLauncher:
    """One torchrun on this machine, a child of the supervisor (cockpit.launch.protocol)."""

    name = "local"

    def prepare(self, spec: JobSpec, job_path: str, runs_dir: Path, extra_args: tuple[str, ...],
                options: LaunchOptions) -> Path:
        if options.preflight:
            from cockpit.launch.local import facts

            facts.check(spec, job_path)
        return prepare(spec, job_path, runs_dir, extra_args)

    def schedule(self, run_dir: Path) -> None:
        """Nothing to hand over: the supervisor starts torchrun itself."""

    def start(self, status: RunStatus, run_dir: Path, grace: float | None = None) -> list:
        return [LocalNode(layout.node_script(run_dir, n), host, n, run_dir)
                for n, host in enumerate(status.hosts)]

    def watched(self, status: RunStatus) -> bool:
        return True

    def summarize(self, status: RunStatus, nodes: list) -> str | None:
        return None

    def stop(self, run_dir: Path, status: RunStatus, grace: float, by: str, warn: Warn) -> str:
        killed = procs.kill_run(status.run_id, grace=grace)
        return f"stopped by {by} without a supervisor ({killed} needed SIGKILL)"

    def survey(self, statuses, warn: Warn) -> None:
        return None  # every local run is worked out from its own directory

    def recover(self, run_dir: Path, status: RunStatus, survey: object, warn: Warn) -> RunStatus:
        return reconcile(run_dir, status)


class LocalNode:
    """One node's script run as a child process of the supervisor."""

    def __init__(self, script: Path, host: str, node_rank: int, run_dir: Path):
        log = open(layout.agent_log(run_dir, host), "ab")  # noqa: SIM115 (kept open for the child)
        self.proc = subprocess.Popen(["bash", str(script)], stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True, cwd=run_dir)
        log.close()
        self.host, self.node_rank = host, node_rank

    def poll(self) -> int | None:
        rc = self.proc.poll()
        return None if rc is None else (128 - rc if rc < 0 else rc)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def describe(self) -> NodeRecord:
        return NodeRecord(self.host, self.node_rank, pid=self.proc.pid, exit_code=self.poll(), null_keys=PROCESS_KEYS)


def new_run(spec: JobSpec, job_path: str, runs_dir: Path) -> tuple[str, Path]:
    """The run id and a new run directory holding the job copy; what every local run starts with."""
    if spec.master_port is not None and not port_is_free(spec.master_port):
        raise LaunchError(f"master_port {spec.master_port} is already in use on this machine "
                          "(hint: master_port: auto, or stop what listens there)")
    run_id = new_run_id(spec.name)
    run_dir = create_run_dir(runs_dir, run_id)
    write_private(run_dir / "job.yaml", Path(job_path).read_text(encoding="utf-8"))
    return run_id, run_dir


def prepare(spec: JobSpec, job_path: str, runs_dir: Path, extra_args: tuple[str, ...] = ()) -> Path:
    """Create the run directory with the job copy, the rendered node script and a `starting` status."""
    run_id, run_dir = new_run(spec, job_path, runs_dir)
    facts = facts_for(spec, job_path, str(run_dir.resolve()), run_id, spec.master_port or free_port(),
                      extra_args)
    script = layout.node_script(run_dir, 0)
    write_private(script, render(spec, facts, default_kind(spec), 0 if default_kind(spec) != "dp" else None))
    status = RunStatus(run_id=run_id, name=spec.name, launcher=spec.launcher,
                       job_file=str(Path(job_path).resolve()), hosts=list(facts.node_names),
                       world_size=spec.world_size,
                       stall_after=spec.stall_after, on_stall=spec.on_stall, start_after=spec.start_after)
    write_status(run_dir, status)
    return run_dir


def start(run_dir: Path, grace: float = 10.0) -> int:
    """Start the detached supervisor; returns its pid.

    It is not our child: it forks once more and its first process exits at once (reaped here), so it is
    re-parented to init. A child would stay a zombie after dying until we reaped it, and to everyone else
    (cockpit ps, attach) a zombie's pid still looks taken."""
    env = {k: v for k, v in os.environ.items() if k not in contract.ALL}
    fd = os.open(run_dir / layout.SUPERVISOR_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with open(fd, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "cockpit.launch.supervisor", str(run_dir),
                                 "--grace", str(grace), "--detach"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=log, start_new_session=True, env=env)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    words = out.split()
    if proc.returncode != 0 or not words or not words[0].isdigit():
        raise LaunchError(f"the supervisor did not start (exit {proc.returncode}): see "
                          f"{run_dir / layout.SUPERVISOR_LOG}")
    return int(words[0])


def supervisor_pid(status: RunStatus) -> tuple[int, str | None] | None:
    """(pid, start time) of the run's supervisor as status.json names it; None when it names none (or
    something that is no pid)."""
    sup = status.supervisor or {}
    pid, start = sup.get("pid"), sup.get("start")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    return pid, start if isinstance(start, str) else None


def supervisor_alive(status: RunStatus) -> bool:
    sup = supervisor_pid(status)
    return sup is not None and procs.is_alive(*sup)


def request_stop(status: RunStatus, run_dir: Path) -> bool:
    """Ask the run's supervisor to stop the run; False if there is no live supervisor to ask. The pid is
    signalled only when it is this run's supervisor (procs.is_supervisor), never because a file said so."""
    sup = supervisor_pid(status)
    if sup is None or not procs.is_supervisor(*sup, run_dir):
        return False
    os.kill(sup[0], signal.SIGTERM)
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
    stop = status.stopped_at
    first = first_failure({r: e for r, e in exits.items() if stop is None or e.time < stop}, run_dir)
    complete = status.world_size is not None and len(exits) >= status.world_size
    if first is not None:
        status.state, status.exit_code = "failed", 1
        status.first_failure = failure_record(run_dir, first)
    elif status.stop_requested:
        status.state, status.exit_code = "stopped", status.exit_code or 1
    elif complete:
        status.state, status.exit_code = "succeeded", 0
    else:
        status.state = "lost"
    status.ranks = {str(r): rank_record(run_dir, e) for r, e in sorted(exits.items())}
    status.ended = max((e.time for e in exits.values()), default=time.time())
    status.note = "the supervisor died; state worked out from the ranks' exit records"
    try:
        write_status(run_dir, status)
    except OSError as exc:  # a full or read-only disk: say so, and show the state worked out all the same
        status.note += f" (not recorded in status.json: {exc.strerror or exc})"
    return status
