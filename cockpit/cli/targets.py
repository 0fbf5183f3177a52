"""What a command is pointed at. Which nodes `cockpit gpus` and `cockpit doctor` (without a job) look at: the
options that name them (--nodes, --job, --cluster, else this machine), the ssh settings for them, and the fleet
that probes them. And whether a RUN argument of `logs` / `attach` / `diagnose` is a Slurm job id (a bare number
or ``123_4``: cockpit's run ids never are) and which cockpit run, if any, submitted that job.
Nothing heavy is imported at module level: the options are registered for every `cockpit` invocation."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cockpit.fleet.records import NodeReport


def add_target_options(p: argparse.ArgumentParser) -> None:
    """The options that name the nodes, and how to reach them, on one command's parser."""
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


def fleet_for(args):
    """The fleet (its hosts, ssh settings, python) the arguments name; raises cockpit.cli.common.UsageError
    for bad input."""
    from cockpit.cli.common import UsageError
    from cockpit.fleet import probes as fleet
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
    pool = RemotePool(ssh_options(args, cluster))
    python = args.python or (cluster.python if cluster else "python3")
    return fleet.Fleet(hosts, pool, python=python, timeout=args.timeout)


def _hosts(args, cluster) -> list[str]:
    from cockpit.fleet import probes as fleet

    if args.nodes:
        return fleet.expand_hostlist(args.nodes, fleet.scontrol_hostnames())
    if args.job:
        from cockpit.cli.common import load_job
        from cockpit.launch import registry

        spec = load_job(args.job)
        return registry.for_spec(spec).hosts(spec)
    if args.cluster is not None:
        if cluster and cluster.hosts:
            return list(cluster.hosts)
        partition = args.partition or (cluster.partition if cluster else None)
        from cockpit.slurm.sinfo import node_names

        return node_names(fleet.slurm_nodes(partition))
    return ["localhost"]


def ssh_options(args, cluster):
    """The cluster file's ssh settings (else ssh's own), with the command line's over them."""
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


async def refresh(fl) -> list[NodeReport]:
    """One report per node, then the connections closed (a one-shot command)."""
    try:
        return [n.node_report() for n in await fl.refresh()]
    finally:
        await fl.pool.close()


# -- RUN or JOBID: what `logs`, `attach` and `diagnose` are pointed at ------------------------------------------
def job_target(ref: str, runs_dir):
    """What ``ref`` names: (None, None) when it is no Slurm job id ("123", "123_4") and so a run reference;
    (job_id, run_dir) when a cockpit run submitted that job (cockpit then shows the run, with its per-rank
    logs); (job_id, None) for any other job of the user."""
    from cockpit.run.store import list_runs
    from cockpit.slurm.arrays import run_jobs
    from cockpit.slurm.jobs import parse_job_ref

    job_id = parse_job_ref(ref)
    if job_id is None:
        return None, None
    rows = list_runs(runs_dir)
    run_id = run_jobs(rows).get(job_id)
    return job_id, next((d for d, s in rows if s.run_id == run_id), None) if run_id else None
