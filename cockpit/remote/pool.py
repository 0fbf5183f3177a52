"""One Remote per host, shared by every command and stream on it: this machine by subprocess, the rest by SSH."""

from __future__ import annotations

import asyncio

from cockpit.remote.base import Remote
from cockpit.remote.local import LocalRemote
from cockpit.remote.ssh import SSHOptions, SSHRemote

LOCAL_HOSTS = ("localhost",)


class RemotePool:
    """One Remote per host, shared: LocalRemote for ``local_hosts``, SSHRemote for the rest."""

    def __init__(self, options: SSHOptions | None = None, local_hosts: tuple[str, ...] = LOCAL_HOSTS):
        self.options = options or SSHOptions()
        self.local_hosts = local_hosts
        self._remotes: dict[str, Remote] = {}

    def get(self, host: str) -> Remote:
        if host not in self._remotes:
            local = host in self.local_hosts
            self._remotes[host] = LocalRemote(host) if local else SSHRemote(host, self.options)
        return self._remotes[host]

    async def close(self) -> None:
        await asyncio.gather(*(r.close() for r in self._remotes.values()), return_exceptions=True)
