"""The ssh launch plan: which node runs what, where its run directory is, how to reach it. Written by
``ssh.prepare`` to commands/ssh.json and read back by the supervisor, which has nothing else to go on.
Pure: data, its JSON form, and the per-node scripts rendered from spec + facts.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cockpit.launch.site import LaunchError, facts_for, interpreter
from cockpit.remote import SSHOptions
from cockpit.render import default_kind, render
from cockpit.render.site import Site
from cockpit.run import layout
from cockpit.run import store as runs
from cockpit.spec.model import JobSpec

if TYPE_CHECKING:
    from cockpit.preflight.checks import JobFacts

PLAN_FILE = layout.SSH_PLAN


@dataclass(frozen=True)
class NodePlan:
    host: str  # as cockpit reaches it over SSH (an ssh config alias is fine)
    node_rank: int
    run_dir: str  # the run directory as the node sees it
    shared: bool  # the node sees the local run directory itself: its logs need no copying
    address: str | None = None  # how the other nodes reach it (c10d: torchrun's --local-addr)


@dataclass(frozen=True)
class Timing:
    """Seconds. Failure: wait ``failure_grace`` for torchrun to tear its node down itself, then stop every
    node (SIGTERM, SIGKILL after ``kill_grace``). Stop (cockpit stop): SIGKILL after ``stop_grace``, unless
    `cockpit run --grace` / `cockpit stop --grace` said otherwise (ssh_node.SSHRun)."""

    failure_grace: float = 5.0
    kill_grace: float = 3.0
    stop_grace: float = 10.0
    give_up: float = 60.0  # a node unreachable this long while the run is being stopped is given up on
    start_timeout: float = 60.0


@dataclass(frozen=True)
class SSHPlan:
    run_id: str
    python: str  # the interpreter on the nodes (runs the node agent too)
    master_addr: str
    master_port: int
    nodes: tuple[NodePlan, ...]
    nproc: int | None  # ranks per node, None when "one per GPU" was not known
    ssh: SSHOptions = field(default_factory=SSHOptions)
    timing: Timing = field(default_factory=Timing)
    # what rendering the node scripts again needs besides job.yaml (recover: puts a spare in a node's place):
    extra_args: tuple[str, ...] = ()  # `cockpit run JOB -- ARGS`
    shell_env: tuple[tuple[str, str], ...] = ()  # the launching shell's NCCL_*/GLOO_*/... (site.forward_shell_env)
    left_out: tuple[str, ...] = ()  # nodes an earlier attempt ran on and recover: left out (blamed), in order

    def node(self, host: str) -> NodePlan:
        return next(n for n in self.nodes if n.host == host)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> SSHPlan:
        data = json.loads(text)
        ssh: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data["ssh"].items()}
        return cls(run_id=data["run_id"], python=data["python"], master_addr=data["master_addr"],
                   master_port=int(data["master_port"]), nodes=tuple(NodePlan(**n) for n in data["nodes"]),
                   nproc=data["nproc"], ssh=SSHOptions(**ssh), timing=Timing(**data["timing"]),
                   extra_args=tuple(data.get("extra_args", ())),
                   shell_env=tuple((str(k), str(v)) for k, v in data.get("shell_env", ())),
                   left_out=tuple(data.get("left_out", ())))


def read_plan(run_dir: Path) -> SSHPlan:
    return SSHPlan.from_json((run_dir / PLAN_FILE).read_text(encoding="utf-8"))


def request_stop(run_dir: Path, grace: float) -> None:
    """Leave ``grace`` (cockpit stop --grace) for the supervisor, which reads it when told to stop."""
    runs.request_stop(run_dir, grace)


def stop_grace(run_dir: Path, default: float) -> float:
    """The grace `cockpit stop --grace` asked for, else ``default``."""
    return float(runs.stop_request(run_dir).get("grace", default))


def node_scripts(spec: JobSpec, facts: Site, plan: SSHPlan) -> dict[int, str]:
    """Each node's script: the same job, with that node's run directory and the plan's master."""
    kind = default_kind(spec)
    out = {}
    for node in plan.nodes:
        node_facts = replace(facts, run_dir=node.run_dir, master_addr=plan.master_addr,
                             master_port=plan.master_port)
        text = render(spec, node_facts, kind, node.node_rank if kind != "dp" else None)
        if spec.rdzv == "c10d" and kind == "torchrun" and node.address:
            text = with_local_addr(text, node.address)
        out[node.node_rank] = text
    return out


def with_local_addr(script: str, address: str) -> str:
    """Add torchrun's --local-addr after --rdzv-conf. Under c10d the node that hosts rank 0 tells the
    workers its *hostname* as MASTER_ADDR unless given an address; where hostnames do not resolve across
    nodes (measured here: "Temporary failure in name resolution", forever) the workers never start."""
    marker = "  --rdzv-conf=is_host="
    at = script.find(marker)
    if at < 0:
        raise ValueError("no --rdzv-conf segment in the rendered torchrun script")
    end = script.index("\n", at) + 1
    return script[:end] + f"  --local-addr={shlex.quote(address)} \\\n" + script[end:]


def render_facts(spec: JobSpec, job_path: str, run_dir: str, run_id: str, master_port: int,
                 extra_args: tuple[str, ...] = ()) -> Site:
    """The job's hosts as its nodes, the first the master; python3 on the nodes unless the job names one."""
    return facts_for(spec, job_path, run_dir, run_id, master_port, extra_args, python=interpreter(spec),
                     master_addr=spec.hosts[0] if spec.hosts else "", node_names=spec.hosts)


def plan_nodes(spec: JobSpec, run_dir: Path, facts: JobFacts, remote_runs_dir: str | None) -> tuple:
    """Each node's run directory: this one where the node sees it, else one under the node's runs dir."""
    out = []
    for rank, host in enumerate(spec.hosts):
        answer = facts.node_checks[host]
        shared = bool(answer.get("shared"))
        base = remote_runs_dir or answer.get("runs_dir")
        if shared:
            where = str(run_dir.resolve())
        elif base:
            where = f"{base.rstrip('/')}/{run_dir.name}"
        else:
            why = answer.get("agent_error") or "it did not say where its runs directory is"
            raise LaunchError(f"cannot launch on {host}: the node agent could not run there ({why}) (hint: "
                              f"cockpit doctor JOB; set python: to an interpreter that exists on {host})")
        out.append(NodePlan(host, rank, where, shared, facts.addresses.get(host)))
    return tuple(out)
