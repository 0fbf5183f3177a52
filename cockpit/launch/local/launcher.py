"""The local launcher: one machine, GPUs or CPU. Prepares the run directory, then hands the run to a
detached supervisor (cockpit.launch.supervisor) and returns; watching is the caller's business.

``LocalLauncher`` is its side of cockpit.launch.protocol (the supervisor itself is started, found and asked to stop by
cockpit.launch.supervision, whatever the launcher); a job with ``sweep:`` goes to the local sweep variant
(cockpit.launch.local.sweep), which stops and recovers like this one."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.launch.site import LaunchError, NoScheduler, facts_for, interpreter
from cockpit.run import layout

# What a run is (cockpit.run.store, records), the renderers and the process tools are imported where a run is
# made, followed or stopped: `cockpit validate` and `render` ask this launcher only for its checks and facts.
if TYPE_CHECKING:
    from cockpit.hang.evidence import Evidence
    from cockpit.hang.transport import TransportGather
    from cockpit.launch.protocol import LaunchOptions, Preflight, PreflightOptions, Warn
    from cockpit.preflight.checks import Check
    from cockpit.render.site import Site
    from cockpit.run.records import NodeRecord
    from cockpit.run.store import RunStatus
    from cockpit.spec.model import JobSpec


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick). Another process could take it before torchrun
    binds it; torchrun then fails with 'address already in use', which the summary reports."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


class LocalLauncher(NoScheduler):
    """One torchrun on this machine, a child of the supervisor (cockpit.launch.protocol)."""

    name = "local"
    runs_here = True
    look_every = 1.0  # its exit records are here: looking is cheap
    follows_without_supervisor = True
    job_sections: frozenset[str] = frozenset()
    nodes_are_torchruns = True
    has_sweeps = False  # a local job with sweep: runs as the sweep variant (cockpit.launch.local.sweep)

    def shell_env(self, spec: JobSpec, environ: Mapping[str, str] | None = None) -> JobSpec:
        """A local run inherits this shell."""
        return spec

    def render_facts(self, spec: JobSpec, job_path: str, run_dir: str, run_id: str, master_port: int,
                     extra_args: tuple[str, ...] = ()) -> Site:
        return render_facts(spec, job_path, run_dir, run_id, master_port, extra_args)

    def preflight(self, spec: JobSpec, job_path: str, options: PreflightOptions) -> Preflight:
        """The checks `cockpit run` makes before it starts the ranks (cockpit.preflight.local)."""
        from cockpit.launch.local import facts as local_facts
        from cockpit.launch.protocol import Preflight
        from cockpit.preflight.local import local_checks

        facts = local_facts.probe(local_facts.here(spec, local_facts.files(spec, job_path)), options.timeout)
        facts = local_facts.imports(spec, facts, timeout=options.timeout)
        return Preflight(local_checks(spec, facts), {"nodes": [facts.node.to_dict()] if facts.node else []})

    def here_checks(self, spec: JobSpec, job_path: str) -> list[Check]:
        """The workdir, the script and the module as the job's python finds it, and the job file's own
        *_SOCKET_IFNAME against this machine's interfaces (the shell's is the run's business)."""
        from cockpit.launch.local import facts as local_facts
        from cockpit.preflight.local import file_checks, interface_checks

        facts = local_facts.here(spec, local_facts.files(spec, job_path), inherit=False)
        return file_checks(spec, facts) + interface_checks(spec, facts)

    def prepare(self, spec: JobSpec, job_path: str, runs_dir: Path, extra_args: tuple[str, ...],
                options: LaunchOptions) -> Path:
        checks: list = []
        if options.preflight:
            from cockpit.launch.local import facts

            checks = facts.check(spec, job_path)
        run_dir = prepare(spec, job_path, runs_dir, extra_args)
        _record_warnings(run_dir, checks)
        return run_dir

    def schedule(self, run_dir: Path) -> None:
        """Nothing to hand over: the supervisor starts torchrun itself."""

    def start(self, status: RunStatus, run_dir: Path, grace: float | None = None) -> list:
        return [LocalUnit(layout.node_script(run_dir, n), host, n, run_dir)
                for n, host in enumerate(status.hosts)]

    def watched(self, status: RunStatus) -> bool:
        return True

    def summarize(self, status: RunStatus, nodes: list) -> str | None:
        return None

    def stop(self, run_dir: Path, status: RunStatus, grace: float, by: str, warn: Warn) -> str:
        from cockpit.launch import procs

        killed = procs.kill_run(status.run_id, grace=grace)
        return f"stopped by {by} without a supervisor ({killed} needed SIGKILL)"

    def survey(self, statuses, warn: Warn) -> None:
        return None  # every local run is worked out from its own directory

    def recover(self, run_dir: Path, status: RunStatus, survey: object, warn: Warn) -> RunStatus:
        from cockpit.launch.supervision import reconcile

        return reconcile(run_dir, status)

    def requeue(self, run_dir: Path) -> str:
        raise LaunchError(f"a local run cannot be requeued (hint: cockpit run --resume {run_dir.name} continues it "
                          "from its last checkpoint)")

    def stacks(self, run_dir: Path, status: RunStatus, ranks: set[int] | None = None,
               timeout: float = 5.0) -> dict[int, Evidence]:
        """SIGURG to the pids the rank wrapper wrote (logs/rank-R.HOST.pid), each process once; the answers are
        read in place, and the ranks' sockets with them (they run here). The pids are looked up once, for the
        signal and the sockets both."""
        import signal

        from cockpit.hang import gather

        found: dict[int, int] = {}

        def signal_ranks(targets: set[int]) -> None:
            found.update(rank_pids(run_dir, status, targets))
            signal_pids(found.values(), signal.SIGURG)

        return gather.collect(run_dir, status, ranks, timeout, signal_ranks=signal_ranks,
                              rank_pids=lambda targets: {r: p for r, p in found.items() if r in targets})

    def links(self, run_dir: Path, status: RunStatus) -> TransportGather | None:
        """The ranks run here: their sockets are read here, as the node agent reads them on an ssh run's nodes
        (all on one host: no connection crosses a link, so none can be slow, but the table is there)."""
        from cockpit.hang import gather
        from cockpit.run.store import rank_files

        pids = rank_pids(run_dir, status, set(rank_files(run_dir, "pid")))
        return gather.local_link(run_dir, pids) if pids else None


def rank_pids(run_dir: Path, status: RunStatus, ranks: set[int]) -> dict[int, int]:
    """Rank -> the pid its wrapper wrote, for each of ``ranks`` whose pid is a process of this run's
    (COCKPIT_RUN_ID in its environment): a pid file names a process, which may since be another's. A pid
    that several ranks name (a process standing for many ranks) is checked once."""
    from cockpit.hang.gather import read_pid
    from cockpit.launch import procs
    from cockpit.run.store import rank_files

    out: dict[int, int] = {}
    checked: dict[int, bool] = {}
    for rank, (_host, path) in rank_files(run_dir, "pid").items():
        pid = read_pid(path) if rank in ranks else None
        if pid is not None and pid not in checked:
            checked[pid] = procs.has_run_id(pid, status.run_id)
        if pid is not None and checked[pid]:
            out[rank] = pid
    return out


def signal_by_pid(run_dir: Path, status: RunStatus, ranks: set[int], signum: int) -> None:
    """``signum`` to each of ``ranks`` by the pid its wrapper wrote, where it is still this run's."""
    signal_pids(rank_pids(run_dir, status, ranks).values(), signum)


def signal_pids(pids: Iterable[int], signum: int) -> None:
    """``signum`` to each process once, however many ranks it stands for."""
    for pid in sorted(set(pids)):
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            continue


class LocalUnit:
    """One node's script run as a child process of the supervisor."""

    def __init__(self, script: Path, host: str, node_rank: int, run_dir: Path):
        import subprocess

        log = open(layout.agent_log(run_dir, host), "ab")  # noqa: SIM115 (kept open for the child)
        self.proc = subprocess.Popen(["bash", str(script)], stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True, cwd=run_dir)
        log.close()
        self.host, self.node_rank = host, node_rank
        self.described: NodeRecord | None = None  # describe()'s last, while its exit code stands

    def poll(self) -> int | None:
        rc = self.proc.poll()
        return None if rc is None else (128 - rc if rc < 0 else rc)

    def terminate(self) -> None:
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def describe(self) -> NodeRecord:
        """Its record; the same (frozen) one while its exit code stands: the supervisor asks 512 nodes each
        second whether one moved on (issue 32), and making the record was most of that."""
        code = self.poll()
        if self.described is None or self.described.exit_code != code:
            from cockpit.run.records import PROCESS_KEYS, NodeRecord

            self.described = NodeRecord(self.host, self.node_rank, pid=self.proc.pid, exit_code=code,
                                        null_keys=PROCESS_KEYS)
        return self.described

    def kill(self) -> int:
        """Its processes carry the run's own id: the supervisor's kill of the run reaches them."""
        return 0


def render_facts(spec: JobSpec, job_path: str, run_dir: str, run_id: str, master_port: int,
                 extra_args: tuple[str, ...] = ()) -> Site:
    """This machine by its short host name, the ranks on this interpreter (or the job's), the master on
    loopback. (The host name as uname gives it, which is what gethostname(2) returns: `cockpit render` need
    not load socket.)"""
    return facts_for(spec, job_path, run_dir, run_id, master_port, extra_args,
                     python=interpreter(spec, sys.executable), master_addr="127.0.0.1",
                     node_names=(os.uname().nodename.split(".")[0] or "localhost",))


def new_run(spec: JobSpec, job_path: str, runs_dir: Path) -> tuple[str, Path]:
    """The run id and a new run directory holding the job copy; what every local run starts with."""
    from cockpit.run.store import create_run_dir, new_run_id, write_private

    if spec.master_port is not None and not port_is_free(spec.master_port):
        raise LaunchError(f"master_port {spec.master_port} is already in use on this machine "
                          "(hint: master_port: auto, or stop what listens there)")
    run_id = new_run_id(spec.name)
    run_dir = create_run_dir(runs_dir, run_id)
    write_private(run_dir / "job.yaml", Path(job_path).read_text(encoding="utf-8"))
    return run_id, run_dir


def prepare(spec: JobSpec, job_path: str, runs_dir: Path, extra_args: tuple[str, ...] = ()) -> Path:
    """Create the run directory with the job copy, the rendered node script and a `starting` status."""
    from cockpit.render import default_kind, render
    from cockpit.run.store import RunStatus, write_private, write_status

    run_id, run_dir = new_run(spec, job_path, runs_dir)
    facts = render_facts(spec, job_path, str(run_dir.resolve()), run_id, spec.master_port or free_port(),
                      extra_args)
    script = layout.node_script(run_dir, 0)
    write_private(script, render(spec, facts, default_kind(spec), 0 if default_kind(spec) != "dp" else None))
    status = RunStatus(run_id=run_id, name=spec.name, launcher=spec.launcher,
                       job_file=str(Path(job_path).resolve()), hosts=list(facts.node_names),
                       world_size=spec.world_size,
                       stall_after=spec.stall_after, on_stall=spec.on_stall, start_after=spec.start_after,
                       recover=spec.recover.to_dict() if spec.recover.enabled else None,
                       max_restarts=spec.max_restarts or None)
    write_status(run_dir, status)
    return run_dir


def _record_warnings(run_dir: Path, checks: list) -> None:
    """The preflight's warnings (a script that spawns its own processes under torchrun, ...) kept in
    <run>/preflight.json, where `cockpit run` reads them to say them before the ranks' first line."""
    from cockpit.preflight.checks import WARN

    warned = [c.to_dict() for c in checks if c.level == WARN]
    if warned:
        import json

        from cockpit.run.store import write_atomic

        write_atomic(run_dir / layout.PREFLIGHT, json.dumps({"checks": warned}, indent=2) + "\n")
