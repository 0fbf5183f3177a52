"""Findings -> job-file changes (cockpit.insight.proposals): a rule's Fix as edits of this job, the values it leaves
to the user chosen from the nodes' interfaces where they decide it, the rest as steps in words."""

from __future__ import annotations

from cockpit.fleet.records import Interface
from cockpit.insight.proposals import FixContext, proposals
from cockpit.logs.diagnose.model import CHOOSE, Finding, Fix, Report
from cockpit.spec.jobedit import Change


def finding(code: str, fix: Fix | None = None) -> Finding:
    return Finding("error", code, f"title of {code}", "hint", (("rank-0.log", 7),), fix)


def test_a_rules_fix_becomes_slurm_and_env_edits_and_the_rest_words():
    fix = Fix(env=(("NCCL_P2P_DISABLE", "1"),), unset=("NCCL_IB_HCA",), slurm=(("exclude", "n3"), ("mem", CHOOSE)),
              container=(("shm-size", "16g"),), note="why")
    job = {"env": {"NCCL_IB_HCA": "mlx5_0"}, "slurm": {"extra": ["--exclude=n1"]}}
    [p] = proposals(Report((), (finding("x", fix),)), job, FixContext(frozenset({"slurm"})))
    assert p.changes == (Change(("env", "NCCL_P2P_DISABLE"), "1"), Change(("env", "NCCL_IB_HCA"), None),
                         Change(("slurm", "extra"), "--exclude=n1,n3", append=True))
    assert any("--mem" in m for m in p.manual) and any("--shm-size=16g" in m for m in p.manual)
    assert p.reason == "why" and p.finding.evidence == (("rank-0.log", 7),)


def test_nccl_on_loopback_gets_the_interface_every_node_shares():
    def iface(name, addr):
        return Interface(name, up=True, ipv4=(addr,), virtual=False)
    nodes = {"a": [Interface("lo", up=True, loopback=True, ipv4=("127.0.0.1/8",)), iface("eth0", "10.0.0.1/24")],
             "b": [iface("eth0", "10.0.0.2/24")]}
    context = FixContext(frozenset({"node_env"}), ("a", "b"), nodes)
    [p] = proposals(Report((), (finding("local_interface"),)), {}, context)
    assert p.changes == (Change(("env", "NCCL_SOCKET_IFNAME"), "eth0"),)
    [blind] = proposals(Report((), (finding("local_interface"),)), {}, FixContext(frozenset({"node_env"}), ("a", "b")))
    assert blind.changes == (Change(("env", "NCCL_SOCKET_IFNAME"), "^lo,docker"),)


def test_findings_without_a_remedy_or_already_fixed_propose_nothing():
    report = Report((), (finding("collective_timeout"), finding("cuda_oom")))
    job = {"env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}}
    assert proposals(report, job, FixContext()) == []
    [p] = proposals(Report((), (finding("port_in_use"),)), {"master_port": 29500}, FixContext())
    assert p.changes == (Change(("master_port",), "auto"),)
