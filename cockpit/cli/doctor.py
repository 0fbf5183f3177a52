"""`cockpit doctor`: can these nodes run a job together (reachable, the same GPU count and versions, a common
network interface, a free master port), or, given a job file, the preflight `cockpit run` makes for it, for
every launcher. Prints the checks (or JSON); exits 1 when one failed."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from cockpit.cli.common import EXIT_FAILED, EXIT_OK
from cockpit.cli.targets import fleet_for, refresh, ssh_options

if TYPE_CHECKING:
    from cockpit.fleet.report import NodeReport


def cmd_doctor(args: argparse.Namespace) -> int:
    import asyncio

    if getattr(args, "job_file", None):
        return doctor_job(args)
    from cockpit.preflight.checks import failed
    from cockpit.preflight.fleet import fleet_checks

    nodes = asyncio.run(refresh(fleet_for(args)))
    checks = fleet_checks(nodes)
    if args.json:  # these checks carry no where/hint: their detail says it (the shape scripts read)
        print(json.dumps({"checks": [{"name": c.name, "level": c.level, "detail": c.detail} for c in checks],
                          "nodes": [n.to_dict() for n in nodes]}, indent=2))
    else:
        print("\n".join(c.line() for c in checks))
    return EXIT_FAILED if failed(checks) else EXIT_OK


def doctor_job(args: argparse.Namespace) -> int:
    """`cockpit doctor JOB.yaml`: the job's preflight (cockpit.preflight.checks) on its own nodes."""
    from cockpit.cli.common import UsageError, load_job
    from cockpit.fleet.cluster import NodesError, load_cluster
    from cockpit.launch.ssh.launcher import check_job
    from cockpit.preflight.checks import FAIL

    if args.nodes or args.job or args.cluster is not None:
        raise UsageError("give either JOB.yaml or --nodes/--job/--cluster, not both")
    from cockpit.launch import with_shell_env

    spec = with_shell_env(load_job(args.job_file))  # what `cockpit run` would check
    if spec.launcher == "local":
        return _doctor_local(spec, args)
    if spec.launcher == "slurm":
        return _doctor_slurm(spec, args)
    try:
        cluster = load_cluster()
    except NodesError as exc:
        raise UsageError(str(exc)) from None
    checks, facts = check_job(spec, args.job_file, ssh_options(args, cluster), args.timeout, python=args.python)
    if args.json:
        print(json.dumps({"checks": [c.to_dict() for c in checks], "nodes": [n.to_dict() for n in facts.nodes],
                          "master": {"address": facts.master_addr, "port": facts.master_port,
                                     "port_free": facts.port_free}, "node_checks": facts.node_checks}, indent=2))
    else:
        print("\n".join(c.line() for c in checks))
        print(render_interfaces(facts.nodes))
    return EXIT_FAILED if any(c.level == FAIL for c in checks) else EXIT_OK


def _doctor_local(spec, args: argparse.Namespace) -> int:
    """A local job: the checks `cockpit run` makes before it starts the ranks (cockpit.preflight.local)."""
    from cockpit.launch.local import facts as local_facts
    from cockpit.preflight.local import local_checks

    facts = local_facts.probe(local_facts.here(spec, local_facts.files(spec, args.job_file)), args.timeout)
    return _print_checks(local_checks(spec, facts), args.json, {"nodes": [facts.node.to_dict()] if facts.node else []})


def _doctor_slurm(spec, args: argparse.Namespace) -> int:
    """A Slurm job: what `cockpit run` checks before sbatch (cockpit.preflight.slurm, over sinfo's nodes).
    Slurm picks the nodes at run time: `doctor --job JOB` (with a nodelist) or --cluster probes them."""
    import subprocess

    from cockpit.launch.slurm import facts as slurm_facts
    from cockpit.preflight.slurm import slurm_checks

    return _print_checks(slurm_checks(spec, slurm_facts.gather(spec, args.job_file, subprocess.run, args.timeout)),
                         args.json)


def _print_checks(checks: list, as_json: bool, extra: dict | None = None) -> int:
    """A job's checks as `run` would refuse them: their lines, or JSON; exit 1 when one failed."""
    from cockpit.preflight.checks import failed

    if as_json:
        print(json.dumps({"checks": [c.to_dict() for c in checks], **(extra or {})}, indent=2))
    else:
        print("\n".join(c.line() for c in checks))
    return EXIT_FAILED if failed(checks) else EXIT_OK


def render_interfaces(nodes: list[NodeReport]) -> str:
    """Each reachable node's interfaces and subnets (what NCCL/GLOO_SOCKET_IFNAME choose from)."""
    from cockpit.preflight.ifadvice import describe_node

    lines = [f"  {n.host}: {describe_node(n.interfaces)}" for n in nodes if n.interfaces]
    return "interfaces:\n" + "\n".join(lines) if lines else ""
