"""`cockpit doctor` without a job (cockpit.preflight.fleet): the checks across nodes, on recorded GPU readings."""

from __future__ import annotations

from dataclasses import replace

from fleet.nodedata import node_from_fixture

from cockpit.cli import gpus as cli_gpus
from cockpit.fleet.records import Interface, NodeReport, Versions
from cockpit.preflight.checks import Check
from cockpit.preflight.fleet import fleet_checks


def test_checks_flag_a_gpu_count_mismatch_and_version_drift():
    a = node_from_fixture("gpu01", "dual-rtx-a5000")
    b = node_from_fixture("gpu02", "h100-80gb-hbm3-load")
    b = replace(b, versions=replace(b.versions, torch="2.4.0"))
    checks = {c.name: c for c in fleet_checks([a, b])}
    assert checks["GPU count"].level == "FAIL" and "gpu01: 2, gpu02: 1" in checks["GPU count"].detail
    assert checks["torch version"].level == "FAIL"
    assert checks["driver version"].level == "warn"
    assert checks["network interface"].detail.startswith("ib0 on every node")
    assert checks["GPUs idle"].level == "warn"
    assert checks["GPU order"].level == "warn"


def test_checks_pass_for_a_uniform_fleet():
    nodes = [node_from_fixture(f"gpu0{i}", "dual-rtx-a5000", warnings=[]) for i in (1, 2)]
    nodes = [replace(n, gpus=tuple(replace(g, processes=()) for g in n.gpus)) for n in nodes]
    assert {c.level for c in fleet_checks(nodes)} == {"ok"}


def test_checks_say_unknown_not_ok_when_no_node_answered():
    down = [NodeReport(h, "unreachable", "connection refused on port 22") for h in ("gpu01", "gpu02")]
    checks = fleet_checks(down)
    assert checks[0].name == "reachable" and checks[0].level == "FAIL"
    assert checks[0].line() == ("FAIL  reachable: gpu01: unreachable (connection refused on port 22); "
                                "gpu02: unreachable (connection refused on port 22)")
    assert {c.level for c in checks[1:]} == {"warn"}
    assert all(c.detail == "unknown (no node answered)" for c in checks[1:])
    assert {"GPU count", "python version", "GPUs idle"} <= {c.name for c in checks}
    assert cli_gpus.no_gpus_reason(down).startswith("no node reported its GPUs (2 unreachable) (hint: ")


def test_checks_say_unknown_when_no_node_reported_a_version():
    node = replace(node_from_fixture("gpu01", "dual-rtx-a5000", warnings=[]), versions=None)
    checks = {c.name: c for c in fleet_checks([node])}
    assert checks["python version"] == Check("python version", "warn", "unknown (no node reported it)")
    assert Versions.from_dict({}) is None  # an empty answer is no answer


def test_doctor_proposes_the_nic_not_docker0_or_a_bridge():
    """docker0 + eth0 in a namespace, and a test bridge next to eth0 on the host (the layout recorded in
    tests/fixtures/sysnet/): both sort before eth0 by name, neither carries a job between nodes."""
    def node(host: str, *ifaces: Interface) -> NodeReport:
        return NodeReport(host, "no_driver", interfaces=ifaces, versions=Versions("3.11.7"))

    lo = Interface("lo", True, True, ipv4=("127.0.0.1/8",), virtual=True)
    named = [node(h, lo, Interface("docker0", True, ipv4=("172.17.0.1/16",)), Interface("eth0", True, ipv4=(ip,)))
             for h, ip in (("a", "10.0.0.1/24"), ("b", "10.0.0.2/24"))]  # an older probe: no virtual facts
    [check] = [c for c in fleet_checks(named) if c.name == "network interface"]
    assert check.detail == "eth0, docker0 on every node (NCCL_SOCKET_IFNAME=eth0)"
    bridged = [node(h, lo, Interface("cpmn1854", True, ipv4=(br,), virtual=True),
                    Interface("eth0", True, ipv4=(ip,), virtual=False))
               for h, br, ip in (("a", "10.233.74.1/24", "192.0.2.2/24"), ("b", "10.233.74.2/24", "192.0.2.3/24"))]
    [check] = [c for c in fleet_checks(bridged) if c.name == "network interface"]
    assert check.detail == "eth0, cpmn1854 on every node (NCCL_SOCKET_IFNAME=eth0)"
