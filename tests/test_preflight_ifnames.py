"""GLOO_SOCKET_IFNAME is a comma-separated list and gloo fails to start if any name in it is absent: preflight
fails a value naming one interface that exists and one that does not, on the node that lacks it, and says
which name is missing. (Pure: cockpit.preflight.checks on node reports as the probe sends them.)"""

from __future__ import annotations

import pytest

from cockpit.fleet.records import NodeReport
from cockpit.preflight import checks as preflight
from cockpit.preflight.checks import FAIL, OK, JobFacts
from cockpit.spec.model import parse_spec


def node(host: str, ip: str, *names: str) -> NodeReport:
    ifaces = [{"name": "lo", "up": True, "loopback": True, "ipv4": ["127.0.0.1/8"]}]
    ifaces += [{"name": n, "up": True, "loopback": False, "ipv4": [f"{ip}/24"]} for n in names]
    return NodeReport.from_dict({"host": host, "state": "no_driver", "reason": None, "hint": None,
                                 "interfaces": ifaces, "gpus": [], "versions": {"python": "3.11.7"}})


def interface_checks(value: str, nodes: list[NodeReport]):
    spec = parse_spec(f"name: t\nscript: train.py\nlauncher: ssh\nnodes: [n1, n2]\ngpus: none\n"
                      f"env:\n  GLOO_SOCKET_IFNAME: {value!r}\n")
    return [c for c in preflight.interfaces(spec, JobFacts(nodes)) if c.name == "interface"]


@pytest.mark.parametrize("value", ["eth0,ib0", "ib0,eth0"])
def test_one_name_missing_fails_on_the_node_that_lacks_it(value):
    checks = interface_checks(value, [node("n1", "10.0.0.1", "eth0", "ib0"), node("n2", "10.0.0.2", "eth0")])
    [bad] = preflight.failed(checks)
    assert bad.level == FAIL and bad.where == ("n2",)
    assert f"GLOO_SOCKET_IFNAME={value} names ib0, missing on n2" in bad.detail


def test_every_name_present_passes():
    checks = interface_checks("eth0,ib0", [node(h, ip, "eth0", "ib0") for h, ip in (("n1", "10.0.0.1"),
                                                                                   ("n2", "10.0.0.2"))])
    assert checks and {(c.level, c.detail) for c in checks} == {
        (OK, "GLOO_SOCKET_IFNAME=eth0,ib0 exists on every node")}
