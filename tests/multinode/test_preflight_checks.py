"""cockpit.preflight.checks's checks on plain facts: every rule says what, where and a hint."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from cockpit.fleet.records import Interface, NodeReport
from cockpit.launch.site import LaunchError
from cockpit.launch.ssh import launcher as ssh
from cockpit.nvml import GpuProcess
from cockpit.preflight import checks as preflight
from cockpit.preflight.checks import FAIL, OK, JobFacts
from cockpit.spec.model import parse_spec

VERSIONS = {"python": "3.11.7", "torch": "2.5.1", "torch_cuda": "12.1", "nccl": "2.21.5"}


def job(text: str = "", nodes: str = "[n1, n2]"):
    return parse_spec(f"name: t\nscript: train.py\nlauncher: ssh\nnodes: {nodes}\ngpus: none\n{text}")


def node(host: str, ip: str | None = None, ifname: str = "eth0", state: str = "no_driver", gpus: int = 0,
         versions: dict | None = None) -> NodeReport:
    ifaces = [{"name": "lo", "up": True, "loopback": True, "ipv4": ["127.0.0.1/8"]}]
    if ip:
        ifaces.append({"name": ifname, "up": True, "loopback": False, "ipv4": [f"{ip}/24"]})
    return NodeReport.from_dict({"host": host, "state": state, "reason": None, "hint": None, "interfaces": ifaces,
                                 "gpus": [{"index": i, "processes": []} for i in range(gpus)],
                                 "versions": versions or VERSIONS})


def check(host: str, **extra) -> dict:
    return {"hostname": host, "hostname_addr": "10.0.0.9", "workdir": True, "script": True, "shared": False,
            "resolved": "10.0.0.1", "reached": True, "reach_error": None, **extra}


def facts(*nodes: NodeReport, **kw) -> JobFacts:
    checks = {n.host: check(n.host) for n in nodes if n.state != "unreachable"}
    base = {"master_addr": "10.0.0.1", "master_port": 29500, "port_free": True, "node_checks": checks}
    return JobFacts(list(nodes), **{**base, **kw})


def by_name(checks) -> dict:
    out: dict = {}
    for c in checks:
        out.setdefault(c.name, []).append(c)
    return out


def test_a_healthy_two_node_cpu_job_passes():
    checks = preflight.job_checks(job("env:\n  GLOO_SOCKET_IFNAME: eth0\n"),
                                  facts(node("n1", "10.0.0.1"), node("n2", "10.0.0.2")))
    assert preflight.failed(checks) == []
    names = by_name(checks)
    assert names["interface"][0].detail == "GLOO_SOCKET_IFNAME=eth0 exists on every node"
    assert "NCCL_SOCKET_IFNAME=eth0, GLOO_SOCKET_IFNAME=eth0" in names["interface advice"][0].detail
    assert names["master address"][0].level == OK


def test_missing_interface_names_the_node_what_it_has_and_the_advice():
    f = facts(node("n1", "10.0.0.1"), node("n2", "10.0.0.2", ifname="ens5"))
    [bad] = preflight.failed(preflight.job_checks(job("env:\n  NCCL_SOCKET_IFNAME: '=eth0'\n"), f))
    assert bad.where == ("n2",)
    assert bad.detail == "NCCL_SOCKET_IFNAME==eth0 matches no interface on n2 (it has lo 127.0.0.1/8, ens5 10.0.0.2/24)"
    assert bad.hint.startswith("set NCCL_SOCKET_IFNAME=eth0,ens5")


def test_lo_on_a_multi_node_job_fails_on_every_node():
    f = facts(node("n1", "10.0.0.1"), node("n2", "10.0.0.2"))
    bad = preflight.failed(preflight.job_checks(job("env:\n  NCCL_SOCKET_IFNAME: lo\n  GLOO_SOCKET_IFNAME: lo\n"), f))
    assert [(c.name, c.where) for c in bad] == [("interface", ("n1",)), ("interface", ("n2",))] * 2
    assert "selects the loopback interface on n1" in bad[0].detail


def test_lo_is_fine_on_one_node():
    spec = job("env:\n  GLOO_SOCKET_IFNAME: lo\n", nodes="[n1]")
    assert preflight.failed(preflight.job_checks(spec, facts(node("n1", "10.0.0.1"), master_addr="127.0.0.1"))) == []


def test_exclude_syntax_is_understood():
    f = facts(node("n1", "10.0.0.1"), node("n2", "10.0.0.2"))
    assert preflight.failed(preflight.job_checks(job("env:\n  NCCL_SOCKET_IFNAME: '^lo,docker'\n"
                                                     "  GLOO_SOCKET_IFNAME: eth0\n"), f)) == []
    [bad, _] = preflight.failed(preflight.job_checks(job("env:\n  NCCL_SOCKET_IFNAME: '^eth'\n"
                                                         "  GLOO_SOCKET_IFNAME: eth0\n"), f))
    assert "selects the loopback" in bad.detail  # everything but eth*: only lo is left


def test_gloo_without_ifname_and_a_hostname_on_loopback_fails():
    f = facts(node("n1", "10.0.0.1"), node("n2", "10.0.0.2"))
    f.node_checks["n2"]["hostname_addr"] = "127.0.1.1"
    f.node_checks["n1"]["hostname_addr"] = None
    [bad] = preflight.failed(preflight.job_checks(job(), f))
    assert bad.name == "gloo address" and bad.where == ("n1", "n2")
    assert "n1: does not resolve, n2: 127.0.1.1" in bad.detail and "GLOO_SOCKET_IFNAME=eth0" in bad.hint


def test_unreachable_node_is_reported_once_with_its_hint():
    down = NodeReport("n2", "unreachable", "connection refused on port 22", "is sshd running there?")
    checks = preflight.job_checks(job("env:\n  GLOO_SOCKET_IFNAME: eth0\n"), facts(node("n1", "10.0.0.1"), down))
    [bad] = preflight.failed(checks)
    assert bad.line() == ("FAIL  reachable: n2: unreachable (connection refused on port 22) "
                          "(hint: is sshd running there?)")
    assert "master address" not in by_name(checks)  # not judged on half the nodes


def test_master_port_in_use_and_master_unreachable():
    f = facts(node("n1", "10.0.0.1"), node("n2", "10.0.0.2"), port_free=False, port_error="Address already in use")
    f.node_checks["n2"].update(reached=False, reach_error="10.0.0.1:29500: Connection refused")
    bad = by_name(preflight.failed(preflight.job_checks(job("env:\n  GLOO_SOCKET_IFNAME: eth0\n"), f)))
    assert bad["master port"][0].detail == "port 29500 is in use on n1 (Address already in use)"
    assert "master_port: auto" in bad["master port"][0].hint
    assert bad["master address"][0].where == ("n2",) and "Connection refused" in bad["master address"][0].detail


def test_loopback_master_for_several_nodes_fails():
    f = facts(node("n1", "10.0.0.1"), node("n2", "10.0.0.2"), master_addr="127.0.0.1")
    [bad] = preflight.failed(preflight.job_checks(job("env:\n  GLOO_SOCKET_IFNAME: eth0\n"), f))
    assert bad.name == "master address" and "loopback" in bad.detail


def test_gpu_count_ids_and_versions():
    spec = parse_spec("name: t\nscript: train.py\nlauncher: ssh\nnodes: [n1, n2]\ngpus: [0, 3]\n"
                      "env:\n  NCCL_SOCKET_IFNAME: eth0\n")
    other = {**VERSIONS, "torch": "2.4.0", "nccl": "2.20.5"}
    f = facts(node("n1", "10.0.0.1", state="ok", gpus=4), node("n2", "10.0.0.2", state="ok", gpus=2, versions=other))
    bad = by_name(preflight.failed(preflight.job_checks(spec, f)))
    assert bad["GPU count"][0].detail == "differs: n1: 4, n2: 2"
    assert bad["GPU ids"][0].detail == "gpus: [0,3] asked, but n2 has 2 (0-1)"
    assert bad["torch version"][0].detail == "differs: n1: 2.5.1, n2: 2.4.0"
    assert bad["nccl version"][0].level == FAIL


def test_missing_workdir_and_broken_python():
    f = facts(node("n1", "10.0.0.1"), node("n2", "10.0.0.2"))
    f.node_checks["n1"] = {"agent_error": "/opt/py/bin/python: not found"}
    f.node_checks["n2"]["workdir"] = False
    bad = by_name(preflight.failed(preflight.job_checks(job("env:\n  GLOO_SOCKET_IFNAME: eth0\n"), f)))
    assert bad["python"][0].where == ("n1",) and "python:" in bad["python"][0].hint
    assert bad["workdir"][0].where == ("n2",) and "shared filesystem" in bad["workdir"][0].hint


def test_nccls_exclude_default_skips_an_unused_nic_but_gloo_names_must_be_up():
    """"^docker,lo" (NCCL's default, jobs/ssh-2node.yaml) on nodes with a NIC that is down or has no
    address: NCCL skips those, so does the check; it still needs one interface on the shared subnet."""
    f = facts(node("n1", "10.0.0.1"), node("n2", "10.0.0.2"))
    f.nodes[1] = replace(f.nodes[1], interfaces=(*f.nodes[1].interfaces, Interface("eth1", up=False),
                                                 Interface("ib0", up=True)))
    checks = preflight.job_checks(job("env:\n  NCCL_SOCKET_IFNAME: '^docker,lo'\n  GLOO_SOCKET_IFNAME: eth0\n"), f)
    assert preflight.failed(checks) == []
    [_, bad] = preflight.failed(preflight.job_checks(job("env:\n  GLOO_SOCKET_IFNAME: eth0,eth1\n"), f))
    assert bad.where == ("n2",) and "selects eth1 on n2, which is down" in bad.detail  # gloo: exact names
    [_, bad] = preflight.failed(preflight.job_checks(job("env:\n  NCCL_SOCKET_IFNAME: ib,eth1\n"), f))
    assert bad.where == ("n2",) and "selects only interfaces that are down or have no IPv4" in bad.detail
    for n, ip in ((0, "192.168.8.1/24"), (1, "192.168.9.2/24")):  # up, IPv4, but on subnets of their own
        f.nodes[n] = replace(f.nodes[n], interfaces=(*f.nodes[n].interfaces, Interface("ens9", True, ipv4=(ip,))))
    assert preflight.failed(preflight.job_checks(job("env:\n  NCCL_SOCKET_IFNAME: ens9,eth0\n"), f)) == []
    bad = preflight.failed(preflight.job_checks(job("env:\n  NCCL_SOCKET_IFNAME: ens9\n"), f))
    assert [c.where for c in bad] == [("n1",), ("n2",)]
    assert "selects ens9 on n2, on no subnet that every node shares" in bad[1].detail


def test_routed_nodes_without_a_shared_subnet_warn_and_the_master_check_decides():
    f = facts(node("n1", "10.0.1.5"), node("n2", "10.0.2.5"))
    spec = job("env:\n  NCCL_SOCKET_IFNAME: eth0\n  GLOO_SOCKET_IFNAME: eth0\n")
    checks = by_name(preflight.job_checks(spec, f))
    assert [c.level for c in checks["interface advice"]] == [preflight.WARN]
    assert "no IPv4 subnet is shared" in checks["interface advice"][0].detail
    assert preflight.failed(preflight.job_checks(spec, f)) == []
    f.node_checks["n2"].update(reached=False, reach_error="10.0.1.5:29500: No route to host")
    assert [c.name for c in preflight.failed(preflight.job_checks(spec, f))] == ["master address"]


def test_preflight_json_keeps_no_gpu_process_of_anyone():
    """What ssh.prepare writes to <run>/preflight.json: GPUs yes, other users' command lines no."""
    secret = GpuProcess(7, 10, "alice", "python train.py --wandb-key=s3cr3t")
    n1 = node("n1", "10.0.0.1", state="ok", gpus=2)
    n1 = replace(n1, gpus=(n1.gpus[0], replace(n1.gpus[1], processes=(secret,))))
    kept = ssh.recorded_nodes([n1, node("n2", "10.0.0.2")])
    assert [g["index"] for g in kept[0]["gpus"]] == [0, 1] and kept[0]["interfaces"] == n1.to_dict()["interfaces"]
    assert "s3cr3t" not in json.dumps(kept) and "alice" not in json.dumps(kept)
    assert n1.gpus[1].processes == (secret,)  # the facts themselves are untouched


def test_a_node_whose_agent_failed_is_named_when_launching_without_preflight(tmp_path):
    f = facts(node("n1", "10.0.0.1"), node("n2", "10.0.0.2"))
    f.node_checks["n1"]["runs_dir"] = "/home/u/.local/state/cockpit/runs"
    f.node_checks["n2"] = {"agent_error": "/opt/py/bin/python: No such file or directory"}
    with pytest.raises(LaunchError, match=r"cannot launch on n2: .*/opt/py/bin/python: No such file"):
        ssh.plan_nodes(job(), tmp_path / "run-1", f, None)
    [_, n2] = ssh.plan_nodes(job(), tmp_path / "run-1", f, "/scratch/runs")  # told where: no need to ask
    assert n2.run_dir == "/scratch/runs/run-1"


def test_a_node_without_cockpit_is_not_passed_silently():
    """The fleet's nvidia-smi fallback reports no interfaces or versions: say what was not checked, where."""
    bare = replace(node("n2", "10.0.0.2"), interfaces=None, versions=None)
    checks = by_name(preflight.job_checks(job("env:\n  NCCL_SOCKET_IFNAME: lo\n"), facts(node("n1", "10.0.0.1"), bare)))
    [ifaces] = checks["interfaces"]
    assert ifaces.level == preflight.WARN and ifaces.where == ("n2",)
    assert ifaces.detail.startswith("interfaces not checked on n2 (cockpit is not installed there")
    [vers] = checks["versions"]
    assert vers.level == preflight.WARN and vers.where == ("n2",) and "versions not checked on n2" in vers.detail
    assert [c.where for c in checks["interface"]] == [("n1",)]  # what could be checked still is
