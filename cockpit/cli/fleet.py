"""`cockpit gpus` and `cockpit doctor`: the headless face over cockpit.fleet.nodes. stdout carries the table or
JSON; nodes in error are part of the data; `gpus` exits 1 when no node reported GPUs (every node failed, or
none has a driver), with what to do on stderr; bad arguments exit 2, a failed doctor check exits 1.

Nothing heavy is imported at module level: ``add_fleet_commands`` runs for every `cockpit` invocation.
Without --nodes / --job / --cluster the target is this machine, read through the local seam (no SSH).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cockpit.fleet.report import NodeReport
    from cockpit.nvml import Gpu

from cockpit.cli.common import EXIT_FAILED, EXIT_OK


def add_fleet_commands(sub) -> None:
    """Register `gpus` and `doctor` on cockpit's subparsers."""
    p = sub.add_parser("gpus", help="GPUs of this machine or of many nodes (nvidia-smi order), with processes")
    _add_target_options(p)
    p.add_argument("--json", action="store_true", help='one JSON object: {"nodes": [{"host", "state", ...}]}')
    p.add_argument("--watch", nargs="?", type=float, const=2.0, metavar="SECONDS",
                   help="refresh every SECONDS (default 2) over persistent connections until Ctrl-C")
    p.set_defaults(func=cmd_gpus)

    p = sub.add_parser("doctor", help="check that the nodes can run a job together: reachable, same GPU "
                       "count, same versions, a common network interface, a free master port")
    p.add_argument("job_file", nargs="?", metavar="JOB.yaml",
                   help="the preflight of this job (what `cockpit run` checks before it launches; ssh: its nodes "
                   "reachable, GPUs, versions, its *_SOCKET_IFNAME on every node, master port and address; local: "
                   "script, GPUs, torch, port; slurm: script, partition and gres from sinfo)")
    _add_target_options(p)
    p.add_argument("--json", action="store_true", help='one JSON object: {"checks": [...], "nodes": [...]}')
    p.set_defaults(func=cmd_doctor)


def _add_target_options(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument("--nodes", metavar="LIST", help="hostlist, e.g. gpu[01-04],login1")
    which.add_argument("--job", metavar="JOB.yaml", help="the nodes of this job")
    which.add_argument("--cluster", nargs="?", const="", metavar="FILE",
                       help="the cluster file's hosts (default ~/.config/cockpit/cluster.yaml), else sinfo's nodes")
    p.add_argument("--partition", help="with --cluster and Slurm: only this partition")
    p.add_argument("--python", help="interpreter on the nodes that runs `-m cockpit.node.probe` (default python3)")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per node (default 20)")
    p.add_argument("--ssh-config", action="append", metavar="FILE", help="ssh config file (default ~/.ssh/config)")
    p.add_argument("--known-hosts", metavar="FILE", help="known_hosts file (default: the ssh config's)")
    p.add_argument("--user", help="ssh user (default: the ssh config's)")
    p.add_argument("--identity", action="append", metavar="KEY", help="ssh private key (repeatable)")
    p.add_argument("--trust-new-hosts", action="store_true",
                   help="record the host key of a node never seen before into known_hosts (a changed key is "
                   "still refused)")


def _targets(args):
    """(hosts, fleet) for the arguments; raises cockpit.cli.common.UsageError for bad input."""
    from cockpit.cli.common import UsageError
    from cockpit.fleet import nodes as fleet
    from cockpit.fleet.cluster import cluster_path, load_cluster
    from cockpit.remote import RemotePool

    try:
        cluster = load_cluster(args.cluster or None) if args.cluster else load_cluster()
        hosts = _hosts(args, cluster)
    except fleet.NodesError as exc:
        raise UsageError(str(exc)) from None
    if not hosts:
        raise UsageError("no nodes: the cluster file lists none and Slurm's sinfo is not here "
                         f"(write {cluster_path()}, or give --nodes)")
    pool = RemotePool(_ssh_options(args, cluster))
    python = args.python or (cluster.python if cluster else "python3")
    return fleet.Fleet(hosts, pool, python=python, timeout=args.timeout)


def _hosts(args, cluster) -> list[str]:
    from cockpit.fleet import nodes as fleet

    if args.nodes:
        return fleet.expand_hostlist(args.nodes, fleet.scontrol_hostnames())
    if args.job:
        from cockpit.cli.common import load_job

        return fleet.hosts_from_spec(load_job(args.job))
    if args.cluster is not None:
        if cluster and cluster.hosts:
            return list(cluster.hosts)
        partition = args.partition or (cluster.partition if cluster else None)
        return [n.name for n in fleet.slurm_nodes(partition)]
    return ["localhost"]


def _ssh_options(args, cluster):
    from dataclasses import replace

    from cockpit.remote import SSHOptions

    options = cluster.ssh if cluster else SSHOptions()
    changes = {"connect_timeout": min(options.connect_timeout, args.timeout)}
    if args.ssh_config:
        changes["config"] = tuple(args.ssh_config)
    if args.known_hosts:
        changes["known_hosts"] = args.known_hosts
    if args.user:
        changes["user"] = args.user
    if args.identity:
        changes["identity"] = tuple(args.identity)
    if args.trust_new_hosts:
        changes["trust_new_hosts"] = True
    return replace(options, **changes)


def cmd_gpus(args: argparse.Namespace) -> int:
    import asyncio

    fl = _targets(args)
    if args.watch is not None:
        return asyncio.run(_watch(fl, args.watch, args.json))
    nodes = asyncio.run(_refresh(fl))
    print(json.dumps({"nodes": [n.to_dict() for n in nodes]}, indent=2) if args.json else render_table(nodes),
          flush=True)
    if any(n.state == "ok" for n in nodes):
        return EXIT_OK
    print(f"cockpit: {no_gpus_reason(nodes)}", file=sys.stderr)
    return EXIT_FAILED


def no_gpus_reason(nodes: list[NodeReport]) -> str:
    """Why no node reported GPUs, and what to do, in one line."""
    states = [n.state for n in nodes]
    if all(s == "no_driver" for s in states):
        where = "this machine" if [n.host for n in nodes] == ["localhost"] else f"any of the {len(nodes)} nodes"
        return (f"no NVIDIA driver on {where}, so no GPUs to show (hint: install the NVIDIA driver, or run on CPU: "
                "gpus: none in the job file)")
    counts = ", ".join(f"{states.count(s)} {s.replace('_', ' ')}" for s in dict.fromkeys(states))
    return (f"no node reported its GPUs ({counts}) (hint: each node's line says why; check that ssh HOST works, "
            "or give --timeout, --python, --user)")


async def _refresh(fl) -> list[NodeReport]:
    try:
        return [n.node_report() for n in await fl.refresh()]
    finally:
        await fl.pool.close()


async def _watch(fl, interval: float, as_json: bool) -> int:
    import asyncio

    fl.start(interval)
    clear = sys.stdout.isatty() and not as_json
    try:
        await fl.refresh_now(min(fl.timeout, 5.0))
        while True:
            nodes = [n.node_report() for n in fl.statuses()]
            if as_json:
                print(json.dumps({"time": time.time(), "nodes": [n.to_dict() for n in nodes]}), flush=True)
            else:
                print(("\033[H\033[2J" if clear else "") + render_table(nodes) + ("" if clear else "\n"), flush=True)
            await asyncio.sleep(interval)
    finally:
        await fl.stop()


def render_table(nodes: list[NodeReport]) -> str:
    """Per node: a header line (state, driver), then its GPUs in nvidia-smi order and their processes."""
    out = []
    for n in nodes:
        out.append(_node_line(n))
        if n.gpus:
            out.append(f"  {'GPU':>3}  {'NAME':<24} {'UTIL':>4}  {'MEMORY':>19}  {'TEMP':>4}  {'POWER':>11}  PROCS")
        for g in n.gpus:
            out.append(f"  {g.index:>3}  {_s(g.name)[:24]:<24} {_pct(g.utilization_gpu):>4}  "
                       f"{_memory(g):>19}  {_temp(g.temperature_c):>4}  {_power(g):>11}  {len(g.processes)}")
            for p in g.processes:
                mem = f"{p.used_memory_mib} MiB" if p.used_memory_mib is not None else "? MiB"
                out.append(f"       pid {p.pid:<8} {_s(p.user)[:12]:<12} {mem:>10}  {_s(p.command)[:60]}")
        for w in n.warnings or ():
            out.append(f"  warning: {w}")
    return "\n".join(out)


def _node_line(n: NodeReport) -> str:
    if n.state == "ok":
        facts = [f"driver {n.driver_version}" if n.driver_version else None,
                 f"CUDA {n.cuda_version}" if n.cuda_version else None,
                 f"{len(n.gpus)} GPU" + ("s" if len(n.gpus) != 1 else "")]
        name = f" ({n.hostname})" if n.hostname and n.hostname != n.host else ""
        return f"{n.host}{name}: ok, " + ", ".join(f for f in facts if f)
    hint = f" (hint: {n.hint})" if n.hint else ""
    return f"{n.host}: {n.state.replace('_', ' ')}: {n.reason or 'no reason given'}{hint}"


def _s(value) -> str:
    return "?" if value is None else str(value)


def _pct(value) -> str:
    return "-" if value is None else f"{value}%"


def _temp(value) -> str:
    return "-" if value is None else f"{value}C"


def _memory(g: Gpu) -> str:
    used, total = g.memory_used_mib, g.memory_total_mib
    return "-" if used is None and total is None else f"{_s(used)} / {_s(total)} MiB"


def _power(g: Gpu) -> str:
    draw, limit = g.power_draw_w, g.power_limit_w
    if draw is None and limit is None:
        return "-"
    return f"{'?' if draw is None else round(draw)} / {'?' if limit is None else round(limit)} W"


def cmd_doctor(args: argparse.Namespace) -> int:
    import asyncio

    if getattr(args, "job_file", None):
        return doctor_job(args)
    from cockpit.preflight.checks import failed
    from cockpit.preflight.fleet import fleet_checks

    nodes = asyncio.run(_refresh(_targets(args)))
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
    from cockpit.launch.plan import with_shell_env

    spec = with_shell_env(load_job(args.job_file))  # what `cockpit run` would check
    if spec.launcher == "local":
        return _doctor_local(spec, args)
    if spec.launcher == "slurm":
        return _doctor_slurm(spec, args)
    try:
        cluster = load_cluster()
    except NodesError as exc:
        raise UsageError(str(exc)) from None
    checks, facts = check_job(spec, args.job_file, _ssh_options(args, cluster), args.timeout, python=args.python)
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

    facts = local_facts.probe(local_facts.files(spec, args.job_file), args.timeout)
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
