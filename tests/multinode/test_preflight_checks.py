"""cockpit.preflight's checks on plain facts: every rule says what, where and a hint."""

from __future__ import annotations

from cockpit import preflight
from cockpit.preflight import FAIL, OK, JobFacts
from cockpit.spec import parse_spec

VERSIONS = {"python": "3.11.7", "torch": "2.5.1", "torch_cuda": "12.1", "nccl": "2.21.5"}


def job(text: str = "", nodes: str = "[n1, n2]"):
    return parse_spec(f"name: t\nscript: train.py\nlauncher: ssh\nnodes: {nodes}\ngpus: none\n{text}")


def node(host: str, ip: str | None = None, ifname: str = "eth0", state: str = "no_driver", gpus: int = 0,
         versions: dict | None = None) -> dict:
    ifaces = [{"name": "lo", "up": True, "loopback": True, "ipv4": ["127.0.0.1/8"]}]
    if ip:
        ifaces.append({"name": ifname, "up": True, "loopback": False, "ipv4": [f"{ip}/24"]})
    return {"host": host, "state": state, "reason": None, "hint": None, "interfaces": ifaces,
            "gpus": [{"index": i, "processes": []} for i in range(gpus)], "versions": versions or VERSIONS}


def check(host: str, **extra) -> dict:
    return {"hostname": host, "hostname_addr": "10.0.0.9", "workdir": True, "script": True, "shared": False,
            "resolved": "10.0.0.1", "reached": True, "reach_error": None, **extra}


def facts(*nodes: dict, **kw) -> JobFacts:
    checks = {n["host"]: check(n["host"]) for n in nodes if n["state"] != "unreachable"}
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
    down = {"host": "n2", "state": "unreachable", "reason": "connection refused on port 22",
            "hint": "is sshd running there?", "interfaces": None, "gpus": [], "versions": None}
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
