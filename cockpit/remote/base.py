"""What every way of running a command on a node shares: the Result, the typed errors (each with the fleet
state it maps to, a message and a hint), the Remote and Stream interfaces, and the shell that starts a command
detached. No IO here: LocalRemote (cockpit.remote.local) and SSHRemote (cockpit.remote.ssh) do it.

Extension point for launchers: ``start_detached`` (setsid, output to a log file, returns the pid, which is
also the process group) and ``signal`` (to that group), both plain shell over ``run``.
"""

from __future__ import annotations

import ipaddress
import shlex
import signal as signals
from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    exit_status: int | None  # None: killed by a signal, or the connection went away
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class RemoteError(Exception):
    """A node could not do what was asked. ``state`` is the fleet state it maps to."""

    state = "error"

    def __init__(self, host: str, message: str, hint: str | None = None):
        self.host, self.message, self.hint = host, message, hint
        super().__init__(f"{host}: {message}" + (f" (hint: {hint})" if hint else ""))


class HostKeyUnknown(RemoteError):
    state = "host_key_unknown"


class HostKeyChanged(RemoteError):
    state = "host_key_changed"


class AuthFailed(RemoteError):
    state = "auth_failed"


class Unreachable(RemoteError):
    state = "unreachable"


class Timeout(RemoteError):
    state = "timeout"


class CommandFailed(RemoteError):
    """The command ran and exited non-zero (or was killed); ``result`` has its output."""

    def __init__(self, host: str, result: Result):
        self.result = result
        tail = result.stderr.strip().splitlines()[-1:] or ["no output on stderr"]
        super().__init__(host, f"exit status {result.exit_status}: {tail[0]}")


def command_line(cmd: list[str] | str) -> str:
    """A list is quoted for the remote shell; a string is passed as it is (it *is* shell)."""
    return cmd if isinstance(cmd, str) else shlex.join(cmd)


def detached_script(cmd: list[str] | str, log_path: str, cwd: str | None = None,
                    env: dict[str, str] | None = None) -> str:
    """Shell that starts ``cmd`` in a new session (setsid), output to ``log_path``, and prints its pid.

    A background job of a non-interactive shell is not a process-group leader, so setsid does not fork:
    the printed pid is the command's own, and its process group and session id. Pure, so it can be tested.
    """
    exports = "".join(f"{k}={shlex.quote(v)} " for k, v in (env or {}).items())
    body = f"exec {command_line(cmd)}" if isinstance(cmd, list) else cmd
    lines = [f"cd {shlex.quote(cwd)} || exit 97"] if cwd else []
    log = shlex.quote(log_path)
    lines += [f"mkdir -p \"$(dirname {log})\" || exit 98",
              f"{exports}setsid sh -c {shlex.quote(body)} >{log} 2>&1 </dev/null &",
              "echo $!"]
    return "\n".join(lines)


class Stream:
    """Lines of a running command (async iterator). Ends at the command's EOF; raises CommandFailed if it
    then exits non-zero, or a RemoteError if the connection is lost. ``write`` feeds its stdin."""

    def __aiter__(self):
        return self

    async def __anext__(self) -> str:
        raise NotImplementedError

    def write(self, text: str) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        """Stop the command (close its channel / kill it) and release the stream."""


class Remote:
    """Run commands on one node. Subclasses: LocalRemote, SSHRemote."""

    host: str

    async def run(self, cmd: list[str] | str, timeout: float | None = None, input: str | None = None) -> Result:
        """Run ``cmd`` to its end. ``input``: its stdin (else /dev/null) — the way to pass a script or data
        that must not be seen in any process's argument list (`ps`), such as env values with secrets."""
        raise NotImplementedError

    async def stream(self, cmd: list[str] | str) -> Stream:
        raise NotImplementedError

    async def close(self) -> None:
        """Close the connection (a later command opens a new one)."""

    async def start_detached(self, cmd: list[str] | str, log_path: str, cwd: str | None = None,
                             env: dict[str, str] | None = None, timeout: float | None = 30) -> int:
        """Start ``cmd`` detached from this connection (survives it); returns its pid = process group."""
        result = await self.run(["sh", "-c", detached_script(cmd, log_path, cwd, env)], timeout)
        if not result.ok or not result.stdout.strip().isdigit():
            raise CommandFailed(self.host, result)
        return int(result.stdout.strip())

    async def signal(self, pid: int, sig: int = signals.SIGTERM, group: bool = True,
                     timeout: float | None = 30) -> bool:
        """Send ``sig`` to the process group ``pid`` (or the one process); False if there was none."""
        target = f"-{pid}" if group else str(pid)
        result = await self.run(["kill", "-s", signals.Signals(sig).name[3:], "--", target], timeout)
        return result.ok


def is_ip(text: str) -> bool:
    """Whether ``text`` is an IPv4 or IPv6 address rather than a host name."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
