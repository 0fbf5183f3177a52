"""A private OpenSSH server on loopback for the fleet tests and benchmark (import as ``fleet.sshd``).

Facts this relies on (OpenSSH 9.2p1, measured): one sshd serves 127.0.1.1 ... 127.0.1.N without adding
addresses (all of 127/8 routes to lo); at most 16 ``ListenAddress`` lines (more: "Too many listen sockets",
which ``sshd -t`` does not catch), so for more nodes it binds 0.0.0.0 with ``AllowUsers user@127.0.0.0/8``;
``MaxStartups`` above the concurrent connects and ``MaxSessions`` above the channels per connection;
``/run/sshd`` must exist; ``StrictModes no`` because the keys live under /tmp; with ``UsePAM no`` a user whose
password is locked ("!") is refused, so the test user gets ``*``. The server runs as root (the tests do),
started and stopped by its pid file; nothing here touches the system's own sshd or ~/.ssh.

The test user has /bin/sh as its shell (root's ~/.bashrc runs pyenv init: ~0.13 s per command), and runs the
probe from a copy of the cockpit package under /tmp, because /root (where this interpreter may live) is not
traversable by other users; its interpreter is this one if that user can run it, else /usr/bin/python3.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

USER = "cockpit-test"
SSHD = "/usr/sbin/sshd"
REPO = Path(__file__).resolve().parents[2]


class SshdError(RuntimeError):
    """The test sshd could not be set up: a failure, never a skip."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_user(name: str = USER) -> None:
    """Create the test user (plain /bin/sh, usable by key with UsePAM no) if it does not exist."""
    if subprocess.run(["id", "-u", name], capture_output=True).returncode != 0:
        _check(["useradd", "--create-home", "--shell", "/bin/sh", name])
    _check(["usermod", "-p", "*", name])


def _check(argv: list[str]) -> str:
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise SshdError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def keygen(path: Path, comment: str) -> str:
    """A new ed25519 key pair at ``path``; returns the public key line."""
    _check(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    return path.with_suffix(".pub").read_text().strip()


@dataclass
class World:
    """Files shared by every test server: client keys, authorized_keys, known_hosts, ssh config, probe lib."""

    root: Path
    client_key: Path
    bad_key: Path
    known_hosts: Path
    ssh_config: Path
    authorized_keys: Path
    lib: Path
    python: str

    @property
    def scratch(self) -> Path:
        """A directory the test user can write to (mode 1777, like /tmp)."""
        path = self.root / "scratch"
        if not path.exists():
            path.mkdir()
            path.chmod(0o1777)
        return path

    @property
    def probe_python(self) -> str:
        """What cockpit should run as the node's python (the probe runs as ``<this> -m cockpit.node.probe``)."""
        return f"PYTHONPATH={self.lib} {self.python}"

    def trust(self, address: str, port: int, key_line: str) -> None:
        with open(self.known_hosts, "a") as f:
            f.write(f"[{address}]:{port} {' '.join(key_line.split()[:2])}\n")

    def write_config(self, blocks: list[tuple[str, dict[str, object]]], bad_key_hosts: tuple[str, ...] = ()) -> None:
        """ssh_config: the given Host blocks first (first match wins per option), then the client key for every
        host but ``bad_key_hosts`` (IdentityFile accumulates, so those get only the bad key), then defaults."""
        blocks = [*blocks, (" ".join(["*", *(f"!{h}" for h in bad_key_hosts)]), {"IdentityFile": self.client_key}),
                  *((h, {"IdentityFile": self.bad_key}) for h in bad_key_hosts),
                  ("*", {"User": USER, "UserKnownHostsFile": self.known_hosts, "IdentitiesOnly": "yes"})]
        text = ""
        for pattern, opts in blocks:
            text += f"Host {pattern}\n" + "".join(f"  {k} {v}\n" for k, v in opts.items())
        self.ssh_config.write_text(text)


def make_world() -> World:
    ensure_user()
    if not os.path.exists(SSHD):
        raise SshdError(f"{SSHD} is missing: install openssh-server (tests/run-all.sh does)")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="cockpit-sshd-"))
    root.chmod(0o755)
    client = keygen(root / "client_key", "cockpit-test-client")
    keygen(root / "bad_key", "cockpit-test-bad-client")
    (root / "authorized_keys").write_text(client + "\n")
    (root / "authorized_keys").chmod(0o644)
    (root / "known_hosts").write_text("")
    lib = _copy_probe_lib(root / "lib")
    world = World(root, root / "client_key", root / "bad_key", root / "known_hosts", root / "ssh_config",
                  root / "authorized_keys", lib, _user_python(lib))
    world.write_config([])
    return world


def _copy_probe_lib(lib: Path) -> Path:
    """cockpit's package + pynvml.py where the test user can read them."""
    shutil.copytree(REPO / "cockpit", lib / "cockpit", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    import pynvml

    shutil.copy(pynvml.__file__, lib / "pynvml.py")
    for path in [lib, *lib.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return lib


def _user_python(lib: Path) -> str:
    for candidate in (sys.executable, "/usr/bin/python3", shutil.which("python3") or ""):
        if not candidate:
            continue
        try:  # as the user would over SSH: its own uid, gid and no extra groups
            r = subprocess.run([candidate, "-c", "import cockpit.node.probe"], user=USER, group=USER, extra_groups=[],
                               capture_output=True, env={"PYTHONPATH": str(lib), "PATH": "/usr/bin:/bin"}, cwd="/")
        except PermissionError:
            continue
        if r.returncode == 0:
            return candidate
    raise SshdError(f"no python3 that {USER} can run (this one, {sys.executable}, is not traversable by it)")


class Sshd:
    """One sshd process: its own config, host key, pid file and port."""

    def __init__(self, world: World, name: str, port: int, addresses: list[str] | None,
                 max_startups: int = 300, max_sessions: int = 64):
        self.world, self.port, self.addresses = world, port, addresses
        self.dir = world.root / name
        self.dir.mkdir(exist_ok=True)
        self.max_startups, self.max_sessions = max_startups, max_sessions
        self.host_key = self.dir / "host_ed25519"
        self.host_key_line = keygen(self.host_key, f"cockpit-test-{name}")

    def config_text(self) -> str:
        listen = ([f"ListenAddress {a}" for a in self.addresses] if self.addresses is not None
                  else ["ListenAddress 0.0.0.0"])
        if self.addresses is not None and len(self.addresses) > 16:
            raise SshdError("sshd takes at most 16 ListenAddress lines; pass addresses=None to bind 0.0.0.0")
        return "\n".join([
            f"Port {self.port}", *listen, f"HostKey {self.host_key}", f"PidFile {self.dir / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.world.authorized_keys}", "PubkeyAuthentication yes",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
            f"AllowUsers {USER}@127.0.0.0/8", f"MaxStartups {self.max_startups}:30:{self.max_startups * 2}",
            f"MaxSessions {self.max_sessions}", "AcceptEnv COCKPIT_*", "PrintMotd no", "PrintLastLog no",
            "UseDNS no", "LogLevel ERROR", ""])

    def start(self, timeout: float = 10.0) -> Sshd:
        (self.dir / "sshd_config").write_text(self.config_text())
        pidfile = self.dir / "sshd.pid"
        pidfile.unlink(missing_ok=True)
        _check([SSHD, "-f", str(self.dir / "sshd_config"), "-E", str(self.dir / "sshd.log")])
        probe = (self.addresses or ["127.0.0.1"])[0]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pidfile.exists() and accepts(probe, self.port):
                return self
            time.sleep(0.02)
        log = (self.dir / "sshd.log").read_text() if (self.dir / "sshd.log").exists() else ""
        raise SshdError(f"sshd on port {self.port} did not start: {log.strip()[-500:]}")

    @property
    def pid(self) -> int | None:
        try:
            return int((self.dir / "sshd.pid").read_text())
        except (OSError, ValueError):
            return None

    def children(self) -> list[int]:
        """Every process under the listener: one per connection (and their session children)."""
        return descendants(self.pid) if self.pid else []

    def stop(self, kill_connections: bool = True) -> None:
        """Stop the listener (and, by default, every connection it serves)."""
        victims = ([self.pid] if self.pid else []) + (self.children() if kill_connections else [])
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL if kill_connections else signal.SIGTERM)
            except ProcessLookupError:
                continue
        (self.dir / "sshd.pid").unlink(missing_ok=True)
        probe = (self.addresses or ["127.0.0.1"])[0]
        deadline = time.monotonic() + 5
        while accepts(probe, self.port) and time.monotonic() < deadline:
            time.sleep(0.02)


def accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    parents[int(name)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out, frontier = [], [root]
    while frontier:
        kids = [pid for pid, ppid in parents.items() if ppid in frontier]
        out += kids
        frontier = kids
    return out
