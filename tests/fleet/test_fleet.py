"""cockpit.fleet.probes over real SSH: many nodes, nodes in every error state, a link dropped mid-watch."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from fleet.conftest import BAD_KEY, CHANGED_KEY, DROPPY, NODES, REFUSED, SILENT, UNKNOWN_KEY
from fleet.sshd import USER
from helpers import cockpit_env

from cockpit.fleet import probes as fleet
from cockpit.launch import registry
from cockpit.remote import RemotePool
from cockpit.slurm.sinfo import SINFO_ARGS, node_names, parse_sinfo
from cockpit.spec.model import parse_spec


def make_fleet(lab, hosts, **kw) -> fleet.Fleet:
    kw.setdefault("timeout", 30.0)  # per node: 5 s was not enough for 8 probes over SSH under load (timeout)
    options = kw.pop("options", None) or lab.options()
    return fleet.Fleet(hosts, RemotePool(options), python=kw.pop("python", lab.python), **kw)


async def until(predicate, timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(step)
    return predicate()


def probes_left(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-u", USER, "-o", "args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "cockpit.node.probe" in line and marker in line]


def test_eight_nodes_report_no_driver_interfaces_and_hostname(lab):
    async def go():
        fl = make_fleet(lab, NODES)
        nodes = await fl.refresh()
        await fl.pool.close()
        return nodes
    nodes = asyncio.run(go())  # how long 8, 32, 64 nodes take: tests/bench/bench_fleet.py
    assert [n.host for n in nodes] == NODES
    for n in nodes:
        d = n.to_dict()
        assert d["state"] == "no_driver", d
        assert "no NVIDIA driver" in d["reason"]
        assert d["hostname"] == socket.gethostname()
        assert d["gpus"] == []
        lo = next(i for i in d["interfaces"] if i["name"] == "lo")
        assert lo["loopback"] and "127.0.0.1/8" in lo["ipv4"]
        assert d["versions"]["python"].count(".") == 2
        assert set(d["ports"]) == {"29500"}


def test_mixed_fleet_every_error_has_its_state_and_no_node_delays_the_rest(lab):
    hosts = [SILENT, *NODES[:3], REFUSED, UNKNOWN_KEY, CHANGED_KEY, BAD_KEY]  # the silent one asked first

    async def go():
        # Limits a real SSH login and probe meet on a loaded 2-core machine: with 1.5 s / 2 s, the three healthy
        # nodes read "timeout" under load (load average 13, 1 run in 1). The silent node runs into its limit
        # whatever it is.
        fl = make_fleet(lab, hosts, timeout=20.0, options=lab.options(connect_timeout=8.0))
        nodes = await fl.refresh()
        await fl.pool.close()
        return {n.host: n for n in nodes}
    nodes = asyncio.run(go())
    # the silent node costs its timeout once, in parallel with the rest: every other node had its answer before
    # the silent one was given up on (one after another, all of them would come after it)
    assert max(nodes[h].since for h in hosts if h != SILENT) < nodes[SILENT].since, nodes
    states = {h: n.state for h, n in nodes.items()}
    assert states == {**dict.fromkeys(NODES[:3], "no_driver"), REFUSED: "unreachable", UNKNOWN_KEY: "host_key_unknown",
                      CHANGED_KEY: "host_key_changed", BAD_KEY: "auth_failed", SILENT: "timeout"}
    assert "ssh-keyscan" in nodes[UNKNOWN_KEY].hint
    assert "ssh-keygen -R" in nodes[CHANGED_KEY].hint
    for host in (REFUSED, UNKNOWN_KEY, CHANGED_KEY, BAD_KEY, SILENT):
        d = nodes[host].to_dict()
        assert d["reason"] and d["gpus"] == [] and d["interfaces"] is None


def test_a_link_dropped_mid_watch_marks_only_that_node_and_reconnects(lab):
    hosts = [*NODES[:3], DROPPY]
    changes: list[tuple[str, str]] = []

    async def go():
        fl = make_fleet(lab, hosts, backoff=(0.2, 0.5), on_change=lambda n: changes.append((n.host, n.state)))
        fl.start(0.3)
        try:
            assert await until(lambda: all(n.state == "no_driver" for n in fl.statuses()), 15)
            lab.second.stop()  # kills the listener and the connection: the link drops
            assert await until(lambda: fl.nodes[DROPPY].state == "unreachable", 5)
            others_before = {h: fl.nodes[h].updated for h in NODES[:3]}
            # others keep reporting (twice each), while the dropped node stays down, retried with backoff
            for _ in range(2):
                before = {h: fl.nodes[h].updated for h in NODES[:3]}
                assert await until(lambda b=before: all(fl.nodes[h].updated > b[h] for h in NODES[:3]), 15)
            assert fl.nodes[DROPPY].state == "unreachable"
            assert all(fl.nodes[h].updated > others_before[h] for h in NODES[:3])
            assert all(fl.nodes[h].state == "no_driver" for h in NODES[:3])
            lab.second.start()
            assert await until(lambda: fl.nodes[DROPPY].state == "no_driver", 10)
        finally:
            await fl.stop()
    try:
        asyncio.run(go())
    finally:
        if lab.second.pid is None:
            lab.second.start()
    dropped = [s for h, s in changes if h == DROPPY]
    assert dropped[:3] == ["no_driver", "unreachable", "no_driver"], dropped
    assert all(h == DROPPY or s == "no_driver" for h, s in changes)


def test_keepalive_notices_a_link_that_goes_silent(lab):
    """Freeze the sshd serving one node (no FIN, no RST: a dead link); keepalives (1 s x 2) must notice."""
    hosts = [NODES[5], DROPPY]
    changes: list[tuple[str, str, float]] = []

    async def go():
        fl = make_fleet(lab, hosts, backoff=(0.2, 0.5),
                        on_change=lambda n: changes.append((n.host, n.state, time.monotonic())))
        fl.start(0.3)
        frozen: list[int] = []
        try:
            assert await until(lambda: all(n.state == "no_driver" for n in fl.statuses()), 15)
            frozen = lab.second.children()
            t0 = time.monotonic()
            for pid in frozen:
                os.kill(pid, signal.SIGSTOP)
            assert await until(lambda: any(h == DROPPY and s != "no_driver" for h, s, _ in changes), 8)
            noticed = next(t for h, s, t in changes if h == DROPPY and s != "no_driver") - t0
            assert await until(lambda: fl.nodes[DROPPY].state == "no_driver", 10)  # a fresh connection
            assert fl.nodes[NODES[5]].state == "no_driver"
            return noticed
        finally:
            for pid in frozen:
                os.kill(pid, signal.SIGKILL)
            await fl.stop()
    noticed = asyncio.run(go())
    assert noticed > 0.5, noticed  # by the keepalives (1 s x 2), within the 8 s waited for above


def test_poke_gets_fresh_reports_without_waiting_for_the_interval(lab):
    async def go():
        fl = make_fleet(lab, NODES[:4])
        fl.start(60)  # the periodic report would come only in a minute
        try:
            assert await until(lambda: all(n.updated for n in fl.statuses()), 15)
            t0 = time.time()
            nodes = await fl.refresh_now(5)
            return t0, time.time() - t0, nodes
        finally:
            await fl.stop()
    t0, took, nodes = asyncio.run(go())
    assert asyncio.run(until(lambda: not probes_left("--watch 60"), 5))  # stop() ends the probes on the nodes
    assert all(n.updated >= t0 for n in nodes)
    assert took < 30, took  # at once, not at the 60 s interval
    assert all(n.to_dict()["interfaces"] and n.to_dict()["versions"] for n in nodes)  # merged from the first line


@pytest.mark.parametrize("python", ["/nonexistent/python3", "/usr/bin/env PYTHONPATH= python3"])
def test_a_node_without_cockpit_is_read_with_nvidia_smi(lab, python):
    async def go():
        fl = make_fleet(lab, NODES[6:8], python=python)
        nodes = await fl.refresh()
        fl2 = make_fleet(lab, NODES[6:7], python=python)
        fl2.start(0.3)
        try:
            await until(lambda: fl2.nodes[NODES[6]].updated, 10)
        finally:
            await fl2.stop()
        await fl.pool.close()
        return nodes, fl2.nodes[NODES[6]]
    nodes, watched = asyncio.run(go())
    for n in [*nodes, watched]:
        assert n.state == "no_driver", n
        assert "nvidia-smi" in n.reason and "cockpit is not installed" in n.hint
        assert n.to_dict()["hostname"] == socket.gethostname()
        assert n.to_dict()["source"] == "nvidia-smi"


def test_local_fleet_uses_no_ssh():
    nodes = asyncio.run(fleet.Fleet(["localhost"]).refresh())
    assert nodes[0].state in ("no_driver", "ok") and nodes[0].to_dict()["hostname"] == socket.gethostname()


# -- where nodes come from -------------------------------------------------------------------------------------

def hosts_from_spec(spec):
    return registry.for_spec(spec).hosts(spec)


def test_hosts_from_specs():
    ssh = parse_spec("name: t\nscript: x.py\nlauncher: ssh\nnodes: [a, b]\n")
    slurm = parse_spec('name: t\nscript: x.py\nlauncher: slurm\nnodes: "gpu[01-03]"\n')
    counted = parse_spec("name: t\nscript: x.py\nlauncher: slurm\nnodes: 2\n")
    assert hosts_from_spec(ssh) == ["a", "b"]
    assert hosts_from_spec(slurm) == ["gpu01", "gpu02", "gpu03"]
    assert hosts_from_spec(parse_spec("name: t\nscript: x.py\n")) == ["localhost"]
    with pytest.raises(fleet.NodesError, match="Slurm picks"):
        hosts_from_spec(counted)


def test_expand_hostlist_prefers_scontrol(tmp_path):
    fake = tmp_path / "scontrol"
    fake.write_text('#!/bin/sh\n[ "$1 $2" = "show hostnames" ] && echo "from-scontrol-1\nfrom-scontrol-2"\n')
    fake.chmod(0o755)
    assert fleet.expand_hostlist("n[1-2]", fleet.scontrol_hostnames(str(fake))) == ["from-scontrol-1",
                                                                                   "from-scontrol-2"]
    assert fleet.scontrol_hostnames("") is None
    broken = tmp_path / "broken-scontrol"  # Slurm installed without a configured cluster: scontrol fails
    broken.write_text("#!/bin/sh\necho 'scontrol: fatal: Could not establish a configuration source' >&2\nexit 1\n")
    broken.chmod(0o755)
    assert fleet.expand_hostlist("n[1-2]", fleet.scontrol_hostnames(str(broken))) == ["n1", "n2"]
    with pytest.raises(fleet.NodesError):
        fleet.expand_hostlist("n[2-1]")


def test_expand_hostlist_asks_nothing_unless_told(tmp_path):
    """Pure by default: an scontrol on PATH is not run unless the caller passes it (scontrol_hostnames())."""
    (tmp_path / "scontrol").write_text('#!/bin/sh\necho from-scontrol\n')
    (tmp_path / "scontrol").chmod(0o755)
    code = ("from cockpit.fleet import probes as fleet; print(fleet.expand_hostlist('n[1-2]'), "
            "fleet.expand_hostlist('n[1-2]', fleet.scontrol_hostnames()))")
    env = cockpit_env(PATH=f"{tmp_path}:{os.environ['PATH']}")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, check=True)
    assert r.stdout.split("] ") == ["['n1', 'n2'", "['from-scontrol']\n"]


def test_parse_sinfo():
    # The output shape of `sinfo --noheader --Node --format=%N|%G|%t|%P` (fields per sinfo(1)): one line per
    # node and partition, "(null)" for no GRES, "*" marking the default partition.
    text = "gpu01|gpu:a100:4|mix|gpu*\ngpu01|gpu:a100:4|mix|debug\ngpu02|gpu:a100:4|idle|gpu*\ncpu01|(null)|down*|cpu\n"
    nodes = parse_sinfo(text)
    assert [(n.name, n.gres, n.state, n.partition) for n in nodes] == [
        ("gpu01", "gpu:a100:4", "mix", "gpu"), ("gpu01", "gpu:a100:4", "mix", "debug"),
        ("gpu02", "gpu:a100:4", "idle", "gpu"), ("cpu01", None, "down*", "cpu")]
    assert node_names(nodes) == ["gpu01", "gpu02", "cpu01"]


def test_slurm_nodes_go_through_the_injected_runner():
    """sinfo through the Slurm runner (cockpit.slurm.query's shape): argv in, its answer parsed, a
    refusal one NodesError line with sinfo's last word."""
    asked = []

    def sinfo(argv):
        asked.append(argv)
        return subprocess.CompletedProcess(argv, 0, "n1|gpu:a100:4|idle|gpu*\nn1|gpu:a100:4|idle|debug\n"
                                           "n2|(null)|down*|cpu\n", "")

    nodes = fleet.slurm_nodes("gpu", runner=sinfo)
    assert asked == [[*SINFO_ARGS, "--partition=gpu"]]
    assert [(n.name, n.gres, n.state, n.partition) for n in nodes] == [("n1", "gpu:a100:4", "idle", "gpu"),
                                                                       ("n1", "gpu:a100:4", "idle", "debug"),
                                                                       ("n2", None, "down*", "cpu")]

    def refused(argv):
        return subprocess.CompletedProcess(argv, 1, "", "sinfo: error: x\nsinfo: fatal: no config\n")

    with pytest.raises(fleet.NodesError, match="sinfo: fatal: no config"):
        fleet.slurm_nodes(runner=refused)
