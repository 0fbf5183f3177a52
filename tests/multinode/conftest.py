"""Fixtures for the multi-node tests: three namespaced "hosts" with their own sshd (see multinode.netns).

node1, node2: eth0 on the cluster subnet; node2 does not share the runs directory (a tmpfs over it, and
its own COCKPIT_RUNS_DIR), so its logs come back over SSH. node3: its NIC is named ens5 (for the doctor's
interface checks). A cluster file points cockpit at the test ssh config (XDG_CONFIG_HOME)."""

from __future__ import annotations

import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env
from multinode.netns import Cluster, NetnsError, Node, make_cluster

from cockpit.remote import SSHOptions


@dataclass
class Lab:
    cluster: Cluster
    runs_root: Path
    config_home: Path

    @property
    def ssh_config(self) -> Path:
        return self.cluster.world.ssh_config

    def options(self, **changes) -> SSHOptions:
        base = {"config": (str(self.ssh_config),), "connect_timeout": 5.0, "keepalive_interval": 2.0,
                "keepalive_count_max": 3}
        return SSHOptions(**{**base, **changes})

    def env(self, runs: Path) -> dict[str, str]:
        return cockpit_env(COCKPIT_RUNS_DIR=str(runs), XDG_CONFIG_HOME=str(self.config_home), NO_COLOR="1")

    def runs(self) -> Path:
        path = self.runs_root / f"t-{secrets.token_hex(3)}"
        path.mkdir()
        return path

    def job(self, name: str, nodes: list[str], env: dict[str, str] | None = None, **fields) -> Path:
        env = {"GLOO_SOCKET_IFNAME": "eth0"} if env is None else env
        lines = [f"name: {name}", "script: demo.py", f"workdir: {REPO / 'jobs'}", "launcher: ssh",
                 f"nodes: [{', '.join(nodes)}]", "gpus: none", f"python: {sys.executable}"]
        lines += [f"{k}: {v}" for k, v in fields.items()]
        if env:
            lines += ["env:"] + [f"  {k}: {v!r}" for k, v in env.items()]
        path = self.cluster.root / "jobs" / f"{name}-{secrets.token_hex(2)}.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
        return path

    def cockpit(self, runs: Path, *args: str, timeout: float = 150) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True,
                              cwd=REPO, env=self.env(runs), timeout=timeout)


@pytest.fixture(scope="session")
def lab():
    try:
        cluster = make_cluster()
    except NetnsError as exc:
        pytest.fail(f"the multi-node test cluster could not be made: {exc}")
    try:
        runs_root = cluster.root / "runs"
        runs_root.mkdir()
        base = cluster.subnet.rsplit(".", 1)[0]
        cluster.add(Node("node1", f"{base}.11"))
        cluster.add(Node("node2", f"{base}.12", private=runs_root, runs_dir=str(runs_root / "node2-own")))
        cluster.add(Node("node3", f"{base}.13", ifname="ens5"))
        cluster.ssh_config([("node9", {"HostName": f"{base}.99", "User": "root"})])  # nothing there
        config_home = cluster.root / "config"
        (config_home / "cockpit").mkdir(parents=True)
        (config_home / "cockpit" / "cluster.yaml").write_text(
            f"ssh:\n  config: {cluster.world.ssh_config}\n  connect_timeout: 5\n  keepalive: 2\n")
    except Exception as exc:
        cluster.close()
        pytest.fail(f"the multi-node test cluster could not be made: {exc}")
    yield Lab(cluster, runs_root, config_home)
    cluster.close()
