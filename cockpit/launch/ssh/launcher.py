"""The ssh launcher: one torchrun per node, started over SSH, supervised from this machine.

``prepare`` asks the nodes (cockpit.launch.ssh.facts), refuses a job whose preflight fails
(cockpit.preflight.checks), picks the master port on the master and the master address the other nodes can
reach, finds out which nodes share this machine's filesystem (a marker file in the runs directory), then
writes the run directory: the job, each node's rendered script (its own --node-rank; the node's run
directory), the plan (commands/ssh.json) and status.json. The detached supervisor does the rest
(cockpit.launch.ssh.unit): starts the scripts detached, follows the logs back, tears every node down when
one fails, stops them on `cockpit stop`; without a supervisor, cockpit.launch.ssh.orphan asks the nodes.

A node that does not share the filesystem gets its run directory under its own runs directory
($COCKPIT_RUNS_DIR, else $XDG_STATE_HOME/cockpit/runs, else ~/.local/state/cockpit/runs there), unless
``SSHLaunch.remote_runs_dir`` says otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.fleet.records import NodeReport
from cockpit.launch.protocol import LaunchOptions, Preflight, PreflightOptions, Warn
from cockpit.launch.site import LaunchError, NoScheduler, PreflightFailed, forward_shell_env, interpreter
from cockpit.launch.ssh.facts import ask_nodes, check_job
from cockpit.launch.ssh.plan import PLAN_FILE, SSHPlan, Timing, node_scripts, plan_nodes, render_facts
from cockpit.launch.supervision import reconcile, supervisor_alive
from cockpit.preflight import checks as preflight
from cockpit.remote import SSHOptions
from cockpit.run import layout
from cockpit.run.store import RunStatus, create_run_dir, new_run_id, write_atomic, write_private, write_status
from cockpit.spec.model import JobSpec

if TYPE_CHECKING:
    from cockpit.hang.evidence import Evidence
    from cockpit.hang.transport import TransportGather
    from cockpit.preflight.checks import Check
    from cockpit.render.site import Site

PREFLIGHT_FILE = layout.PREFLIGHT


@dataclass(frozen=True)
class SSHLaunch:
    """How to launch. ``ssh`` None: the cluster file's settings (cockpit.fleet.cluster.load_cluster), else defaults."""

    ssh: SSHOptions | None = None
    preflight: bool = True
    timeout: float = 20.0  # seconds per node for each question
    remote_runs_dir: str | None = None  # run directories on nodes that do not share the filesystem
    timing: Timing = field(default_factory=Timing)


class SSHLauncher(NoScheduler):
    """One torchrun per node over SSH, supervised from this machine (cockpit.launch.protocol)."""

    name = "ssh"
    runs_here = False
    look_every = 5.0  # each look asks the nodes
    follows_without_supervisor = False  # its supervisor copies the nodes' logs and exit records back
    job_sections = frozenset({"node_env"})
    nodes_are_torchruns = True
    has_sweeps = False
    replacement_hint = "add a spare to recover.spare_nodes"
    resume_instead: str | None = "cockpit run {job}"  # its nodes' run directories are theirs: a new run

    def shell_env(self, spec: JobSpec, environ: Mapping[str, str] | None = None) -> JobSpec:
        """The shell's NCCL_*/GLOO_*/TORCH_NCCL_*/TORCH_DISTRIBUTED_* join env: (nothing crosses SSH by itself;
        the node scripts export them, so `cockpit render` shows them)."""
        return forward_shell_env(spec, environ)

    def render_facts(self, spec: JobSpec, job_path: str, run_dir: str, run_id: str, master_port: int,
                     extra_args: tuple[str, ...] = ()) -> Site:
        return render_facts(spec, job_path, run_dir, run_id, master_port, extra_args)

    def preflight(self, spec: JobSpec, job_path: str, options: PreflightOptions) -> Preflight:
        """The job's checks on its own nodes, asked over SSH (``options.ssh()``: the cluster file's settings),
        with each node's interfaces and subnets after them."""
        checks, facts = check_job(spec, job_path, options.ssh() if options.ssh else SSHOptions(), options.timeout,
                                  python=options.python)
        return Preflight(checks, {"nodes": [n.to_dict() for n in facts.nodes],
                                  "master": {"address": facts.master_addr, "port": facts.master_port,
                                             "port_free": facts.port_free}, "node_checks": facts.node_checks},
                         render_interfaces(facts.nodes))

    def here_checks(self, spec: JobSpec, job_path: str) -> list[Check]:
        """An ssh job's files live on its nodes: `cockpit doctor JOB` checks them there."""
        return []

    def prepare(self, spec: JobSpec, job_path: str, runs_dir: Path, extra_args: tuple[str, ...],
                options: LaunchOptions) -> Path:
        """Asks the nodes; refuses a failed preflight (PreflightFailed) unless ``options.preflight`` is off."""
        launch = SSHLaunch(preflight=options.preflight)
        if options.trust_new_hosts:
            launch = SSHLaunch(preflight=options.preflight, ssh=replace(ssh_options(launch), trust_new_hosts=True))
        return prepare(spec, job_path, runs_dir, extra_args, launch)

    def schedule(self, run_dir: Path) -> None:
        """Nothing to hand over: the supervisor starts every node's script over SSH."""

    def start(self, status: RunStatus, run_dir: Path, grace: float | None = None) -> list:
        from cockpit.launch.ssh.unit import make_ssh_nodes

        return make_ssh_nodes(status, run_dir, grace)

    def watched(self, status: RunStatus) -> bool:
        return True

    def summarize(self, status: RunStatus, nodes: list) -> str | None:
        return None

    def stop(self, run_dir: Path, status: RunStatus, grace: float, by: str, warn: Warn) -> str:
        """The run's processes are on the nodes: stop them there."""
        from cockpit.launch.ssh import orphan

        try:
            stopped = orphan.stop_nodes(run_dir, grace)
        except (OSError, ValueError, KeyError) as exc:
            raise LaunchError(f"cannot read the ssh plan: {exc}") from None
        left = orphan.left_behind(stopped)
        for host in left:
            warn(f"{run_dir.name}: {host}: {stopped[host]}")
        return f"stopped by {by} without a supervisor, on every node over SSH: " + "; ".join(
            f"{h}: {t}" for h, t in stopped.items()) + (
            f" (processes of the run may still be running on {', '.join(left)})" if left else "")

    def survey(self, statuses, warn: Warn) -> None:
        return None  # each run's nodes are asked in recover

    def recover(self, run_dir: Path, status: RunStatus, survey: object, warn: Warn) -> RunStatus:
        """A run whose supervisor died: its nodes ran on without it, so ask them; else as a local run."""
        if not (status.supervisor and not status.final and not supervisor_alive(status)):
            return reconcile(run_dir, status)
        from cockpit.launch.ssh import orphan

        try:
            return orphan.recover(run_dir, status)
        except (OSError, ValueError, KeyError) as exc:
            warn(f"{run_dir.name}: cannot ask its nodes: {exc}")
            return status

    def replacement(self, run_dir: Path, status: RunStatus, leave_out: tuple[str, ...]) -> str | None:
        """None while a spare (recover.spare_nodes) is left for each blamed node (cockpit.launch.ssh.spare)."""
        from cockpit.launch.ssh import spare

        return spare.replacement(run_dir, status, leave_out)

    def relaunch(self, run_dir: Path, status: RunStatus, attempt: int, leave_out: tuple[str, ...]) -> str | None:
        """A spare in place of each node of ``leave_out``, at its node rank; nothing to do without one."""
        from cockpit.launch.ssh import spare

        try:
            return spare.relaunch(run_dir, status, leave_out)
        except (OSError, ValueError, KeyError) as exc:
            raise LaunchError(f"cannot put a spare in place of {', '.join(leave_out)}: {exc}") from None

    def requeue(self, run_dir: Path) -> str:
        raise LaunchError("an ssh run cannot be requeued (hint: cockpit run the job again)")

    def stacks(self, run_dir: Path, status: RunStatus, ranks: set[int] | None = None,
               timeout: float = 5.0) -> dict[int, Evidence]:
        """The node agent's `stacks` on every node at once: it signals the node's ranks and sends back what
        they wrote (cockpit.launch.ssh.stacks)."""
        from cockpit.launch.ssh import stacks

        return stacks.collect(run_dir, status, ranks, timeout)

    def links(self, run_dir: Path, status: RunStatus) -> TransportGather | None:
        """The node agent's `links` on every node at once (cockpit.launch.ssh.links): no signal to the ranks."""
        from cockpit.launch.ssh import links

        return links.collect(run_dir, status)


def render_interfaces(nodes: list[NodeReport]) -> str:
    """Each reachable node's interfaces and subnets (what NCCL/GLOO_SOCKET_IFNAME choose from)."""
    from cockpit.preflight.ifadvice import describe_node

    lines = [f"  {n.host}: {describe_node(n.interfaces)}" for n in nodes if n.interfaces]
    return "interfaces:\n" + "\n".join(lines) if lines else ""




def ssh_options(launch: SSHLaunch) -> SSHOptions:
    if launch.ssh is not None:
        return launch.ssh
    from cockpit.fleet.cluster import NodesError, load_cluster

    try:
        cluster = load_cluster()
    except NodesError as exc:
        raise LaunchError(f"cannot read the cluster file: {exc}") from None
    return cluster.ssh if cluster else SSHOptions()


def prepare(spec: JobSpec, job_path: str, runs_dir: Path, extra_args: tuple[str, ...] = (),
            launch: SSHLaunch | None = None) -> Path:
    """Ask the nodes, check, and write the run directory; raises LaunchError (PreflightFailed)."""
    launch = launch or SSHLaunch()
    own = len(spec.env)
    spec = forward_shell_env(spec)  # NCCL_*/GLOO_*/... of this shell: checked by the preflight, exported on the nodes
    shell_env = spec.env[:len(spec.env) - own]  # forward_shell_env puts the shell's before the job's own
    if spec.sweep is not None:
        raise LaunchError("sweeps run as Slurm job arrays (hint: drop sweep:, or launcher: slurm)")
    options = ssh_options(launch)
    runs_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    checks, facts = ask_nodes(spec, job_path, runs_dir, options, launch.timeout)
    if launch.preflight and preflight.failed(checks):
        raise PreflightFailed(job_path, checks)
    if facts.master_port is None or len(facts.node_checks) != spec.num_nodes:
        raise LaunchError("the nodes could not all be asked (hint: cockpit doctor " + job_path + ")")
    return _write_run(spec, job_path, runs_dir, extra_args, launch, options, facts, checks, shell_env)








def _write_run(spec, job_path, runs_dir, extra_args, launch: SSHLaunch, options, facts, checks,
               shell_env: tuple[tuple[str, str], ...] = ()) -> Path:
    run_id = new_run_id(spec.name)
    run_dir = create_run_dir(runs_dir, run_id)
    write_private(run_dir / "job.yaml", Path(job_path).read_text(encoding="utf-8"))
    write_atomic(run_dir / PREFLIGHT_FILE, json.dumps({"checks": [c.to_dict() for c in checks],
                                                       "nodes": recorded_nodes(facts.nodes),
                                                       "node_checks": facts.node_checks}, indent=2) + "\n")
    nproc = spec.nprocs if spec.nprocs is not None else _gpu_count(facts)
    if nproc is not None and spec.nprocs is None:
        spec = replace(spec, procs_per_node=nproc)  # gpus: all -> the count the nodes reported
    plan = SSHPlan(run_id=run_id, python=interpreter(spec), master_addr=facts.master_addr or spec.hosts[0],
                   master_port=facts.master_port, nodes=plan_nodes(spec, run_dir, facts, launch.remote_runs_dir),
                   nproc=nproc, ssh=options, timing=launch.timing, extra_args=tuple(extra_args), shell_env=shell_env)
    base = render_facts(spec, job_path, str(run_dir.resolve()), run_id, plan.master_port, extra_args)
    for rank, text in node_scripts(spec, base, plan).items():
        write_private(layout.node_script(run_dir, rank), text)
    write_atomic(run_dir / PLAN_FILE, plan.to_json())
    note = None if launch.preflight or not preflight.failed(checks) else \
        "launched with --no-preflight although checks failed: " + "; ".join(
            c.line() for c in preflight.failed(checks))
    status = RunStatus(run_id=run_id, name=spec.name, launcher="ssh", job_file=str(Path(job_path).resolve()),
                       hosts=list(spec.hosts), world_size=None if nproc is None else nproc * spec.num_nodes,
                       note=note,
                       stall_after=spec.stall_after, on_stall=spec.on_stall, start_after=spec.start_after,
                       recover=spec.recover.to_dict() if spec.recover.enabled else None,
                       max_restarts=spec.max_restarts or None)
    write_status(run_dir, status)
    return run_dir


def recorded_nodes(nodes: list[NodeReport]) -> list[dict]:
    """The probe answers as preflight.json keeps them: without the processes on each GPU, whose users and
    full command lines (other people's, secrets in arguments) do not belong in a run directory."""
    out = []
    for n in nodes:
        d = n.to_dict()
        out.append({**d, "gpus": [{k: v for k, v in g.items() if k != "processes"} for g in d["gpus"]]})
    return out


def _gpu_count(facts: preflight.JobFacts) -> int | None:
    counts = {len(n.gpus) for n in facts.up()}
    return counts.pop() if len(counts) == 1 and 0 not in counts else None
