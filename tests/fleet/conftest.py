"""Fixtures for the fleet tests: a real OpenSSH server on loopback addresses, a server that accepts and never
speaks, and SSH options pointing at them. If sshd cannot start, the tests fail (they never skip)."""

from __future__ import annotations

import shutil
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from fleet.sshd import Sshd, SshdError, World, free_port, keygen, make_world

from cockpit.remote import SSHOptions

NODES = [f"127.0.1.{i}" for i in range(1, 9)]  # 8 good nodes
UNKNOWN_KEY, CHANGED_KEY = "127.0.1.9", "127.0.1.10"  # served, but known_hosts has no / another key
DROPPY = "127.0.1.11"  # served by a second sshd that the drop test stops and restarts
BAD_KEY = "127.0.1.12"  # served and trusted, but the ssh config gives it a key the server does not accept
REFUSED = "127.0.1.20"  # nothing listens there
SILENT = "127.0.2.1"  # accepts TCP, never says a word
JUMPED = "jumped-node"  # an ssh config alias: HostName 127.0.1.3, reached through ProxyJump 127.0.1.2


class SilentServer:
    """Accepts connections and holds them open without sending a byte (a hung sshd, a black-holed proxy)."""

    def __init__(self, host: str):
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self._stop.set()
        self.thread.join(2)
        for conn in self.held:
            conn.close()
        self.sock.close()


@dataclass
class Lab:
    world: World
    main: Sshd
    second: Sshd
    silent: SilentServer

    def options(self, **changes) -> SSHOptions:
        # A connect timeout a real login meets on a loaded 2-core machine (3 s did not: 8 nodes logging in at a
        # load average of 30 read "timeout", 3 runs in 3); the tests of timeouts give their own.
        base = {"config": (str(self.world.ssh_config),), "connect_timeout": 30.0, "keepalive_interval": 1.0,
                "keepalive_count_max": 2}
        return SSHOptions(**{**base, **changes})

    @property
    def python(self) -> str:
        return self.world.probe_python


@pytest.fixture(scope="session")
def lab():
    try:
        world = make_world()
        main = Sshd(world, "main", free_port(), [*NODES, UNKNOWN_KEY, CHANGED_KEY, BAD_KEY]).start()
        second = Sshd(world, "second", free_port(), [DROPPY]).start()
    except SshdError as exc:
        pytest.fail(f"the test sshd could not start: {exc}")
    for address in [*NODES, BAD_KEY]:
        world.trust(address, main.port, main.host_key_line)
    world.trust(DROPPY, second.port, second.host_key_line)
    world.trust(CHANGED_KEY, main.port, keygen(world.root / "impostor_key", "an-older-key-of-this-host"))
    silent = SilentServer(SILENT)
    jump = {"HostName": NODES[2], "Port": main.port, "ProxyJump": NODES[1]}
    world.write_config([(DROPPY, {"Port": second.port}), (SILENT, {"Port": silent.port}), (JUMPED, jump),
                        ("127.0.1.*", {"Port": main.port})], bad_key_hosts=(BAD_KEY,))
    yield Lab(world, main, second, silent)
    silent.close()
    second.stop()
    main.stop()
    shutil.rmtree(world.root, ignore_errors=True)


@pytest.fixture
def fresh_known_hosts(lab, tmp_path) -> Path:
    """An empty known_hosts of the test's own (for trust-on-first-use tests)."""
    path = tmp_path / "known_hosts"
    path.write_text("")
    return path
