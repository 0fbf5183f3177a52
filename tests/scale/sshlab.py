"""Stand-in ranks over the real ssh launch path: a few network-namespace nodes (tests/multinode/netns.py: each
its own sshd, PID namespace and hostname, all seeing this machine's filesystem), each carrying many stand-in
ranks, one stand-in process per node as ``runner: spawn`` has it. The run is prepared and supervised as
`cockpit run` does an ssh run: preflight over SSH, the node scripts started detached on each node, the
node agent's `watch` per node, stacks asked through the node agent.

With ``private``, no node shares this machine's run directory (a tmpfs of each node's own over the runs, as
tests/multinode's node2 has): every rank's files come back over SSH in the node agent's `watch`, what a cluster
without a shared filesystem costs the supervisor.

Needs root (namespaces), like tests/multinode; run it under `flock /tmp/cockpit-heavy.lock` there.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from multinode.netns import Cluster, Node, make_cluster

from scale import product
from scale.harness import Sim, _per_node, cockpit_env, job_text


@dataclass
class Lab:
    cluster: Cluster
    config_home: Path  # XDG_CONFIG_HOME with cockpit/cluster.yaml pointing at the lab's ssh config
    own: Path | None = None  # private: where the runs are, hidden on every node under a tmpfs of its own

    @property
    def hosts(self) -> list[str]:
        return list(self.cluster.nodes)

    def close(self) -> None:
        self.cluster.close()


def make_lab(nodes: int, private: bool = False) -> Lab:
    """``nodes`` namespaced hosts node1..nodeN with their sshd, and the cluster file that points cockpit there;
    ``private``: none of them sees the runs here (module docstring)."""
    cluster = make_cluster()
    try:
        base = cluster.subnet.rsplit(".", 1)[0]
        own = cluster.root / "own" if private else None
        if own is not None:
            own.mkdir()
        for i in range(nodes):
            name = f"node{i + 1}"
            cluster.add(Node(name, f"{base}.{11 + i}", private=own, runs_dir=str(own / name) if own else None))
        cluster.ssh_config()
        config_home = cluster.root / "config"
        (config_home / "cockpit").mkdir(parents=True)
        (config_home / "cockpit" / "cluster.yaml").write_text(
            f"ssh:\n  config: {cluster.world.ssh_config}\n  connect_timeout: 5\n  keepalive: 2\n")
    except BaseException:
        cluster.close()
        raise
    return Lab(cluster, config_home, own)


def launch_ssh(lab: Lab, ranks: int, *, home: Path | None = None, stall_after: int = 600,
               args: tuple[str, ...] = (), grace: float = 10.0) -> Sim:
    """``ranks`` stand-in ranks spread over every node of ``lab``, launched as `cockpit run` launches an ssh job."""
    hosts = lab.hosts
    per = _per_node(ranks, len(hosts))
    home = home or Path(tempfile.mkdtemp(prefix="cockpit-scale-ssh-"))
    job = home / "scale.yaml"
    extra = ("launcher: ssh", f"nodes: [{', '.join(hosts)}]", f"python: {sys.executable}",
             "env:", "  GLOO_SOCKET_IFNAME: eth0")
    job.write_text(job_text("scale", per, home / "control.json", stall_after=stall_after, args=args, extra=extra))
    (home / "control.json").write_text("{}")
    # the launch reads the cluster file (ssh settings) from here, and the supervisor inherits it
    os.environ["XDG_CONFIG_HOME"] = str(lab.config_home)
    runs = lab.own / home.name / "runs" if lab.own is not None else home / "runs"
    run_dir = product.prepare(job, runs)
    env = cockpit_env(home / "runs", home, XDG_CONFIG_HOME=str(lab.config_home))
    sim = Sim(home, run_dir, ranks, hosts, product.start(run_dir, grace), env)
    sim.start_clock()
    return sim
