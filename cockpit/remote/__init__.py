"""One seam for "run a command on a node": a local subprocess or SSH, behind one interface.

base (Result, the typed errors, the Remote and Stream interfaces, the detached-start shell), local
(LocalRemote: subprocess), ssh (SSHRemote: the only asyncssh import, deferred to the first connection),
pool (RemotePool: one Remote per host). The names below are the seam's public face, so a caller needs
only ``from cockpit.remote import ...``; importing it loads no asyncssh.
"""

from cockpit.remote.base import (
    AuthFailed,
    CommandFailed,
    HostKeyChanged,
    HostKeyUnknown,
    Remote,
    RemoteError,
    Result,
    Stream,
    Timeout,
    Unreachable,
    command_line,
    detached_script,
)
from cockpit.remote.local import LocalRemote
from cockpit.remote.pool import LOCAL_HOSTS, RemotePool
from cockpit.remote.ssh import SSHOptions, SSHRemote

__all__ = ["LOCAL_HOSTS", "AuthFailed", "CommandFailed", "HostKeyChanged", "HostKeyUnknown", "LocalRemote",
           "Remote", "RemoteError", "RemotePool", "Result", "SSHOptions", "SSHRemote", "Stream", "Timeout",
           "Unreachable", "command_line", "detached_script"]
