"""deadlink (issue 31) on the lab: a gloo DDP run across three namespaced sshd nodes; once it trains, node2's
link goes down (`ip link set` on the host side of its veth: its NIC loses carrier, as with a pulled cable or a
dead switch port, and node2's SSH goes with it). The stall finding must name node2's link within stall
detection + 10 s, from node1's and node3's sockets alone. Before the fault, `cockpit stacks` on the healthy
run shows every node's link row and no link finding."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time

import pytest
from helpers import REPO, wait_for
from multinode.test_ssh_runs import read

from cockpit.launch.ssh.stacks import GATHER_CONNECT_MAX_S
from cockpit.run.store import list_runs, read_status

pytestmark = pytest.mark.slow
NODES = ["node1", "node2", "node3"]
STALL_AFTER = 12  # under load (2 cores, 6 ranks, burners) a healthy first step took > 8 s


def _python(lab) -> str:
    """The job's python on the nodes with this checkout first on its path: SSH sessions carry no PYTHONPATH, and
    the nodes' probe imports cockpit (wherever this interpreter's own install of it points)."""
    path = lab.cluster.root / "deadlink-python"
    repo = shlex.quote(str(REPO))  # after what the rank wrapper puts first (the run's hook)
    python = shlex.quote(sys.executable)
    path.write_text(f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}"{repo} exec {python} "$@"\n')
    path.chmod(0o755)
    return str(path)


def _veth(lab, node: str) -> str:
    """The host side of the node's veth (netns.Cluster.add names them by the order nodes were added)."""
    return f"cpmn{lab.cluster.tag}v{list(lab.cluster.nodes).index(node)}"


def _link(lab, node: str, state: str) -> None:
    subprocess.run(["ip", "link", "set", _veth(lab, node), state], check=True, capture_output=True)


def _ended(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        out, err = proc.communicate()
        pytest.fail(f"cockpit run ended before the fault ({proc.returncode}): {out[-1500:]}{err[-3000:]}")


def test_dead_link_on_node2_names_node2_within_stall_detection_plus_10_s(lab):
    runs = lab.runs()
    job = lab.job("deadlink", NODES, on_stall="report", node_env="{node3: {GLOO_SOCKET_IFNAME: ens5}}")
    job.write_text(job.read_text().replace(f"python: {sys.executable}", f"python: {_python(lab)}"))
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(job), "-q", "--grace", "5",
                             "--stall-after", str(STALL_AFTER), "--", "--epochs", "1", "--steps-per-epoch", "3000"],
                            cwd=REPO, env=lab.env(runs), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    down = False
    try:
        run_dir = wait_for(lambda: _ended(proc) or (list_runs(runs) and list_runs(runs)[0][0]), 60, "the run directory")
        try:
            wait_for(lambda: _ended(proc) or "step=10 " in read(f"{run_dir}/logs/rank-0.*.log"), 240,
                     "training to start")
        except pytest.fail.Exception:
            s = read_status(run_dir)
            tails = "".join(f"--- {p.name}: {p.read_text(errors='replace')[-400:]}\n"
                            for p in sorted((run_dir / "logs").glob("*.log")))
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(f"training did not start: {s.state} {s.first_failure} {s.note} "
                        f"{[f.text for f in s.findings]}\n{err[-3000:]}\n{tails}")
        healthy = lab.cockpit(runs, "stacks", run_dir.name, timeout=90)
        assert healthy.returncode == 0, healthy.stderr[-2000:]
        links = healthy.stdout.split("== links ==\n", 1)[1].splitlines()
        assert [row.split(":")[0] for row in links[:3]] == ["link node1", "link node2", "link node3"]
        assert links[3] == "no connection is stuck or slow: no link finding", links
        wait_for(lambda: not [f for f in read_status(run_dir).findings if f.kind != "straggler"], 60,
                 "no stall before the fault")  # (a straggler under load is no matter here)
        fault = time.time()
        _link(lab, "node2", "down")
        down = True
        stall = wait_for(lambda: next((f for f in read_status(run_dir).findings if f.kind == "stall"), None),
                         STALL_AFTER + 60, "the stall finding")
        _link(lab, "node2", "up")  # let node2 be reached again, to be stopped
        down = False
        stop = lab.cockpit(runs, "stop", run_dir.name, "--grace", "5", timeout=120)
        out, err = proc.communicate(timeout=120)
    finally:
        if down:
            _link(lab, "node2", "up")
        proc.kill()
    assert stop.returncode == 0, stop.stderr[-2000:]
    link = stall.link
    assert link is not None, stall.text
    # node2 is named: from its neighbours' sockets stuck toward it (dead_link), or, when they had nothing queued
    # toward it as the link went (waiting to receive), as the one node that did not answer (unreachable)
    assert (link["node"], link["iface"]) == ("node2", "eth0") and link["kind"] in ("dead_link", "unreachable"), link
    assert link["silent"] == ["node2"], link
    if link["kind"] == "dead_link":
        assert {e["observer"] for e in link["edges"] if e["peer"] == "node2"} <= {"node1", "node3"}, link
        assert "node2's link (eth0) is the likely fault: its connections to node" in stall.text
    else:
        assert "node2's link (eth0) or node2 itself is the likely fault: node2 did not answer" in stall.text
    assert "--exclude node2" in stall.hint
    assert "STALL" in err and "node2's link (eth0)" in err
    took = stall.found - fault
    print(f"deadlink: fault -> {link['kind']} finding naming node2 in {took:.1f} s (threshold {stall.threshold_s} s, "
          f"silent {link['silent']}, the gather waited {link['waited_s']} s for them)")
    assert took <= stall.threshold_s + 10
    # the gather's own deadline (cockpit.launch.ssh.stacks.gather_over), not SSH's connect timeout, let node2 go
    assert link["waited_s"] is not None and link["waited_s"] <= GATHER_CONNECT_MAX_S + 1, link["waited_s"]
