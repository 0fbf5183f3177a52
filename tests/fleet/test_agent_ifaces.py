"""One interface reader for both programs cockpit runs on nodes: the ssh launcher's node agent, shipped as one
program (cockpit.launch.ssh.shell.agent_source) over real SSH to a python that cannot import cockpit, lists the
node's interfaces exactly as the probe does (cockpit.node.ifaces in both), `virtual` included."""

from __future__ import annotations

import asyncio
import json

from fleet.conftest import NODES

from cockpit.fleet.records import Interface
from cockpit.launch.ssh.shell import agent_command, agent_source
from cockpit.remote import RemotePool

KEYS = {"name", "up", "loopback", "mtu", "mac", "speed_mbps", "ipv4", "ipv6", "virtual"}


def python_without_cockpit(lab) -> str:
    """The node's python as the test user runs it over SSH, in isolated mode and without site-packages: it can
    import the standard library and nothing of cockpit's (a node where cockpit is not installed)."""
    path = lab.world.scratch / "python-without-cockpit"
    path.write_text(f'#!/bin/sh\nexec {lab.world.python} -I -S "$@"\n')
    path.chmod(0o755)
    return str(path)


def read_both(lab, python: str) -> tuple[list[dict], list[dict]]:
    """(the agent's `check` interfaces, the probe's) from the same node over one SSH connection."""
    async def go():
        pool = RemotePool(lab.options())
        try:
            remote = pool.get(NODES[0])
            bare = await remote.run([python, "-c", "import cockpit"], 30)
            agent = await remote.run(agent_command(python, "check", {"workdir": "/", "script": None,
                                                                     "marker": "/nonexistent", "token": ""}), 30)
            probe = await remote.run(f"{lab.python} -m cockpit.node.probe", 30)
        finally:
            await pool.close()
        return bare, agent, probe
    bare, agent, probe = asyncio.run(go())
    assert "No module named 'cockpit'" in bare.stderr, bare  # the agent below runs without cockpit
    assert agent.ok and probe.ok, (agent.stderr, probe.stderr)
    return json.loads(agent.stdout)["interfaces"], json.loads(probe.stdout)["interfaces"]


def test_the_agent_without_cockpit_lists_the_interfaces_the_probe_lists(lab):
    python = python_without_cockpit(lab)
    for _ in range(3):  # a link may come or go between the two reads (another test's veth): read both again
        mine, theirs = read_both(lab, python)
        if mine == theirs:
            break
    assert mine == theirs
    assert all(set(i) == KEYS for i in mine)
    lo = next(i for i in mine if i["name"] == "lo")
    assert lo["loopback"] and lo["virtual"] is True and "127.0.0.1/8" in lo["ipv4"]
    assert [Interface.from_dict(i).to_dict() for i in mine] == mine  # the preflight reads every fact of it


def test_the_shipped_agent_imports_nothing_of_cockpit():
    source = agent_source()
    compile(source, "<node agent>", "exec")
    assert "import cockpit" not in source and "from cockpit" not in source
    assert "def interfaces(" in source and "def is_virtual(" in source
