"""Several "hosts" on this machine for the multi-node tests (import as ``multinode.netns``).

Each node is a Linux network namespace joined by a veth pair to a private bridge (10.233.X.0/24, X from
this process's pid, nothing routed anywhere else: each namespace's default route is a blackhole), with a
PID, mount and UTS namespace of its own (its own /proc, so finding a run's processes "on a node" sees only
that node's; its own hostname, which resolves to nothing, as on many clusters) and its own sshd (own host
key, port 22, root by key only) under a tiny init that reaps orphans. Measured here: gloo then needs
GLOO_SOCKET_IFNAME (the hostname does not resolve), c10d needs node 0 marked as the store host.

All nodes see this machine's filesystem, except where a node gets a tmpfs over ``private`` (then the
launcher's shared-filesystem test says no for it, and logs come back over SSH). Everything is removed by
``Cluster.close`` (by pid, namespace and link name). SSH setup (keys, known_hosts, ssh config) is the fleet
tests' (fleet.sshd). If namespaces cannot be made, ``NetnsError`` says why: the tests fail, never skip.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from fleet.sshd import SSHD, World, accepts, descendants, keygen, make_world

INIT = """
import os, signal, subprocess, sys
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
child = subprocess.Popen(sys.argv[1:])
while True:  # PID 1 of the node: reap every orphan (detached torchruns end up here)
    pid, _ = os.wait()
    if pid == child.pid:
        sys.exit(1)
"""


class NetnsError(RuntimeError):
    """The namespaces could not be set up: a test failure, never a skip."""


def _run(*argv: str) -> str:
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise NetnsError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


@dataclass
class Node:
    name: str  # ssh config alias and hostname inside the namespace
    address: str
    ifname: str = "eth0"
    private: Path | None = None  # a tmpfs over this path, seen only by this node
    runs_dir: str | None = None  # COCKPIT_RUNS_DIR in its SSH sessions
    netns: str = ""
    proc: subprocess.Popen | None = None
    key_line: str = ""

    def nsexec(self, *argv: str, **kw) -> subprocess.CompletedProcess:
        """Run a command in the node's network namespace (this machine's PID namespace)."""
        return subprocess.run(["ip", "netns", "exec", self.netns, *argv], capture_output=True, text=True, **kw)


@dataclass
class Cluster:
    world: World
    root: Path
    tag: str
    subnet: str
    bridge: str
    nodes: dict[str, Node] = field(default_factory=dict)
    _netns: list[str] = field(default_factory=list)

    def add(self, node: Node) -> Node:
        """Create the node's namespace, link, and sshd."""
        node.netns = f"cpmn{self.tag}-{node.name}"
        veth = f"cpmn{self.tag}v{len(self.nodes)}"
        _run("ip", "netns", "add", node.netns)
        self._netns.append(node.netns)
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", veth + "p")
        _run("ip", "link", "set", veth + "p", "netns", node.netns)
        ns = ("ip", "-n", node.netns)
        _run(*ns, "link", "set", veth + "p", "name", node.ifname)
        _run(*ns, "addr", "add", f"{node.address}/24", "dev", node.ifname)
        _run(*ns, "link", "set", node.ifname, "up")
        _run(*ns, "link", "set", "lo", "up")
        _run(*ns, "route", "add", "blackhole", "default")  # nothing leaves the bridge's subnet
        _run("ip", "link", "set", veth, "master", self.bridge)
        _run("ip", "link", "set", veth, "up")
        self.nodes[node.name] = node
        self._start_sshd(node)
        return node

    def _start_sshd(self, node: Node) -> None:
        d = self.root / node.name
        d.mkdir()
        node.key_line = keygen(d / "host_ed25519", f"cockpit-multinode-{node.name}")
        setenv = [f"SetEnv COCKPIT_RUNS_DIR={node.runs_dir}"] if node.runs_dir else []
        (d / "sshd_config").write_text("\n".join([
            "Port 22", "ListenAddress 0.0.0.0", f"HostKey {d / 'host_ed25519'}", "PidFile none",
            f"AuthorizedKeysFile {self.world.authorized_keys}", "PubkeyAuthentication yes",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
            "PermitRootLogin prohibit-password", f"AllowUsers root@{self.subnet.rsplit('.', 1)[0]}.*",
            "MaxStartups 100:30:200", "MaxSessions 64", "PrintMotd no", "PrintLastLog no", "UseDNS no",
            "LogLevel ERROR", *setenv, ""]))
        mount = f"mount -t tmpfs cockpit-private {node.private} && " if node.private else ""
        inner = (f"hostname {node.name} && {mount}exec {sys.executable} -c '{INIT}' "
                 f"{SSHD} -D -e -f {d / 'sshd_config'}")
        log = open(d / "sshd.log", "wb")  # noqa: SIM115 (the child keeps it)
        node.proc = subprocess.Popen(["ip", "netns", "exec", node.netns, "unshare", "--pid", "--fork",
                                      "--mount-proc", "--uts", "--kill-child", "sh", "-c", inner],
                                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + 15
        while not accepts(node.address, 22):
            if node.proc.poll() is not None or time.monotonic() > deadline:
                raise NetnsError(f"sshd of {node.name} did not start: {(d / 'sshd.log').read_text()[-500:]}")
            time.sleep(0.05)
        with open(self.world.known_hosts, "a") as f:
            f.write(f"{node.address} {' '.join(node.key_line.split()[:2])}\n")

    def ssh_config(self, extra: list[tuple[str, dict]] = ()) -> Path:
        blocks = [(n.name, {"HostName": n.address, "User": "root"}) for n in self.nodes.values()]
        blocks += list(extra)
        self.world.write_config([*blocks, (self.subnet.rsplit(".", 1)[0] + ".*", {"User": "root"})])
        return self.world.ssh_config

    def pids(self, node: str) -> list[int]:
        """Pids (this machine's numbering) of every process in the node's PID namespace."""
        init = self.nodes[node].proc.pid
        return descendants(init)

    def close(self) -> None:
        for node in self.nodes.values():
            if node.proc is not None and node.proc.poll() is None:
                node.proc.kill()  # --kill-child: the node's init dies, and with it every process there
                node.proc.wait(10)
        for name in self._netns:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        shutil.rmtree(self.world.root, ignore_errors=True)


def make_cluster() -> Cluster:
    """An empty cluster: the bridge and the SSH world; add nodes with ``Cluster.add``."""
    if shutil.which("ip") is None:
        raise NetnsError("`ip` (iproute2) is missing: apt-get install iproute2")
    if os.geteuid() != 0:
        raise NetnsError("network namespaces need root")
    remove_stale()
    world = make_world()
    tag = str(os.getpid())[-6:]
    third = _free_third(20 + os.getpid() % 200)
    bridge = f"cpmn{tag}"
    cluster = Cluster(world, world.root, tag, f"10.233.{third}.0", bridge)
    try:
        _run("ip", "link", "add", bridge, "type", "bridge")
        _run("ip", "addr", "add", f"10.233.{third}.1/24", "dev", bridge)
        _run("ip", "link", "set", bridge, "up")
    except NetnsError:
        cluster.close()
        raise
    return cluster


_TAGGED = re.compile(r"^cpmn(\d+)")


def _alive(tag: str) -> bool:
    """Whether the test process that made ``cpmn<tag>`` objects may still run (the tag: its pid's last 6 digits)."""
    return any(name.isdigit() and name[-6:] == tag for name in os.listdir("/proc"))


def _in_use(path: Path) -> bool:
    """Whether a live process names ``path`` on its command line (an sshd started with its config there)."""
    needle = str(path).encode()
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and needle in Path(f"/proc/{name}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def remove_stale() -> list[str]:
    """Remove what an earlier, killed test run left: its namespaces (and the processes in them), bridge,
    veths and sshd directories, for every cpmn<pid> whose process is gone. Returns what was removed."""
    removed = []
    names = [line.split()[0] for line in _run("ip", "netns", "list").splitlines() if line.strip()]
    for ns in names:
        m = _TAGGED.match(ns)
        if m and not _alive(m.group(1)):
            for pid in _run("ip", "netns", "pids", ns).split():
                kill(int(pid))
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            removed.append(ns)
    for line in _run("ip", "-o", "link", "show").splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        m = _TAGGED.match(name)
        if m and not _alive(m.group(1)):
            subprocess.run(["ip", "link", "del", name], capture_output=True)
            removed.append(name)
    for d in Path(tempfile.gettempdir()).glob("cockpit-sshd-*"):
        try:
            young = time.time() - d.stat().st_mtime < 600  # maybe a test setting up right now
        except OSError:
            continue
        if not young and not _in_use(d):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(str(d))
    return removed


def _free_third(first: int) -> int:
    """A third octet X such that no interface here has an address in 10.233.X.0/24 (from ``first`` on)."""
    used = {int(m.group(1)) for m in re.finditer(r"inet 10\.233\.(\d+)\.", _run("ip", "-4", "-o", "addr"))}
    for k in range(254):
        third = 1 + (first - 1 + k) % 254
        if third not in used:
            return third
    raise NetnsError("every 10.233.X.0/24 is in use here")


def kill(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
