"""deadlink (issue 31): NCCL RAS answers in the link finding, on the recorded RAS reports (tests/fixtures/
deadlink/ras) riding with the recorded TCP snapshots of the 4-namespace gloo lab (tests/fixtures/deadlink/tcp):
RAS naming a missing or dead process on a node corroborates the node the sockets name, breaks a one-pair tie,
or names the node when the sockets say nothing; MISMATCH (a rank behind) blames no node; RUNNING OK while every
rank waits in one collective is said, never as a clearance (NVIDIA/nccl#1730); `stacks` rows and the ``ras``
entry of status.json and `diagnose --json`."""

from __future__ import annotations

import json
import time
from dataclasses import replace

from hang.deadlink_fixture import raw_nodes
from helpers import REPO

from cockpit.hang.evidence import Evidence
from cockpit.hang.finding import hang_finding, stacks_report
from cockpit.hang.linkfind import LinkFinding, NoSingleNode, link_finding
from cockpit.hang.linkwords import link_text
from cockpit.hang.rasread import node_ras, ras_blame
from cockpit.hang.transport import NodeTransport
from cockpit.hang.transport_raw import node_transport
from cockpit.hang.transportgather import gather_of
from cockpit.run.findings import LiveFinding

RAS = REPO / "tests" / "fixtures" / "deadlink" / "ras"
# The RAS fixtures name hosts by their own (masked) lab's addresses: the runs below map them to the lab's nodes,
# as a gather's addr_to_node maps the addresses RAS knows the processes by (their bootstrap interface's).
DEAD_172_213 = "docs-errors-dead.txt"  # DEAD: process 3487984 on 172.16.64.213
STOPPED_172_213 = "docs-incomplete-stopped-process.txt"  # INCOMPLETE: process 3487984 on 172.16.64.213
UNRESPONSIVE_172_245 = "docs-2.29.1-missing-rank.json"  # missing rank 1 (pid 1524345) on 172.16.64.245
EXITED_NODE1 = "example-2.30.7-exit-incomplete.txt"  # rank 7 (pid 3748990) on node1 INCOMPLETE
BEHIND = "ray-a10g-2.28.9-4nodes-mismatch.json"  # rank 1 one AllReduce behind: MISMATCH, all running
RUNNING_OK = "nccl1730-2.26.2-256ranks-running-ok.txt"


def ras_record(name: str) -> dict:
    fmt = "json" if name.endswith(".json") else "text"
    return {"addr": "127.0.0.1:28028", "state": "answered", "format": fmt, "text": (RAS / name).read_text(),
            "ms": 3.0, "truncated": False, "note": None}


def with_ras(nodes: list[NodeTransport], host: str, name: str) -> list[NodeTransport]:
    return [replace(n, ras=node_ras(ras_record(name), n.host)) if n.host == host else n for n in nodes]


def lab(scenario: str, label: str = "t10s") -> list[NodeTransport]:
    return [node_transport(r, f"{scenario}/{label}") for r in raw_nodes(scenario, label)]


def test_deadlink_ras_names_the_node_when_the_sockets_say_nothing():
    """A healthy snapshot (nothing queued) and RAS on n0 naming a stopped process at n2's address: n2."""
    nodes = with_ras(lab("healthy"), "n0", STOPPED_172_213)
    f = link_finding(nodes, {"172.16.64.213": "n2"})
    assert isinstance(f, LinkFinding) and (f.kind, f.node, f.edges) == ("ras_missing", "n2", ())
    assert f.corroboration == ("NCCL RAS names process 3487984 (on 172.16.64.213) INCOMPLETE",)
    assert link_text(f) == ("n2 (eth0) or its link is the likely fault: NCCL RAS names process 3487984 (on "
                            "172.16.64.213) INCOMPLETE there; no connection shows data queued toward it, so TCP "
                            "does not confirm it")
    assert link_finding(lab("healthy"), {"172.16.64.213": "n2"}) is None  # without RAS: nothing


def test_deadlink_ras_names_a_node_by_its_name_too():
    f = link_finding(with_ras(lab("ownhang"), "n3", EXITED_NODE1), {"node1": "n1"})
    assert isinstance(f, LinkFinding) and (f.kind, f.node) == ("ras_missing", "n1")
    assert "rank 7 (pid 3748990 on node1) INCOMPLETE" in f.corroboration[0]


def test_deadlink_ras_corroborates_the_dead_link_the_sockets_name():
    nodes = with_ras(lab("linkdown"), "n1", UNRESPONSIVE_172_245)
    f = link_finding(nodes, {"172.16.64.245": "n2"})
    assert isinstance(f, LinkFinding) and (f.kind, f.node) == ("dead_link", "n2")
    assert "NCCL RAS names rank 1 (pid 1524345 on 172.16.64.245) unresponsive" in f.corroboration
    assert any("n2's eth0 is down" in c for c in f.corroboration)


def test_deadlink_ras_picks_the_end_of_one_pair_that_tcp_cannot():
    """Two nodes, both ends retransmitting, no interface read: TCP cannot say which end; RAS naming a dead
    process at n1's address can."""
    blind = [replace(n, ifaces=()) for n in lab("linkdown-2nodes")]
    assert isinstance(link_finding(blind, {}), NoSingleNode)
    f = link_finding(with_ras(blind, "n0", DEAD_172_213), {"172.16.64.213": "n1"})
    assert isinstance(f, LinkFinding) and (f.kind, f.node) == ("dead_link", "n1")
    assert f.corroboration == ("NCCL RAS names process 3487984 (on 172.16.64.213) DEAD",)


def test_deadlink_ras_mismatch_or_running_ok_blames_no_node():
    """A rank one collective behind (MISMATCH) is not a dead node, and RUNNING OK names nobody."""
    for name in (BEHIND, RUNNING_OK):
        nodes = with_ras(lab("healthy"), "n0", name)
        assert ras_blame(nodes, {}) == {} and link_finding(nodes, {}) is None, name


def test_deadlink_ras_names_two_nodes_no_single_one():
    nodes = with_ras(with_ras(lab("healthy"), "n0", STOPPED_172_213), "n1", UNRESPONSIVE_172_245)
    assert link_finding(nodes, {"172.16.64.213": "n2", "172.16.64.245": "n3"}) is None


def _evidence(scenario: str, ras_on: str | None, ras: str) -> dict[int, Evidence]:
    """Every rank waits in all_reduce (rank 2 gave no stack); node ``ras_on``'s agent asked RAS."""
    raws = raw_nodes(scenario, "t10s")
    for r in raws:
        if r["host"] == ras_on:
            r["ras"] = ras_record(ras)
    g = gather_of([(r["host"], r["addresses"][0]) for r in raws], [[{"transport": r}] for r in raws], {})
    stack = 'Thread 0x1 (most recent call first):\n  File "/x/train.py", line 9 in step\n'
    return {i: Evidence(i, f"n{i}", stack if i != 2 else "", None, {"in": "all_reduce"}, (), g) for i in range(4)}


def test_deadlink_ras_running_ok_in_one_collective_is_said_and_clears_nothing():
    f = hang_finding("stall", 12.0, {}, _evidence("ownhang", "n0", RUNNING_OK), time.time(), "RUN1")
    assert "link" not in f
    assert f["text"].endswith("; NCCL 2.26.2 RAS says RUNNING OK, which clears nothing: RAS does not see a stuck "
                              "data path (NVIDIA/nccl#1730)"), f["text"]
    [entry] = f["connections"]["ras"]
    assert (entry["node"], entry["version"], entry["ok"], entry["comm_states"]) == (
        "n0", "2.26.2", True, [{"comm": "group 0", "state": "RUNNING OK"}])
    f = hang_finding("stall", 12.0, {}, _evidence("linkdown", "n0", RUNNING_OK), time.time(), "RUN1")
    assert f["link"]["node"] == "n2" and "n2's link (eth0) is the likely fault" in f["text"]
    assert "RAS says RUNNING OK, which clears nothing" in f["text"]  # RAS OK beside a dead link: not a clearance


def test_deadlink_ras_in_the_stacks_report_and_the_stall_text():
    ev = _evidence("ownhang", "n0", STOPPED_172_213)
    f = hang_finding("stall", 12.0, {}, ev, time.time(), "RUN1")
    assert f["link"]["kind"] == "ras_missing" and f["link"]["node"] == "172.16.64.213"  # no node has it: as named
    assert "NCCL RAS names process 3487984 (on 172.16.64.213) INCOMPLETE" in f["text"]
    assert "RUNNING OK" not in f["text"]
    rows = stacks_report(ev).split("== links ==\n", 1)[1].splitlines()
    assert "ras n0: NCCL ? (text, 3 ms): RUNNING INCOMPLETE, INCOMPLETE; names process 3487984 (on "\
           "172.16.64.213) INCOMPLETE" in rows, rows


def test_deadlink_ras_entry_in_status_json_and_diagnose_json(tmp_path):
    from hang.test_local_hangs import cockpit

    from cockpit.run.store import RunStatus, write_status

    f = hang_finding("stall", 12.0, {}, _evidence("healthy", "n1", UNRESPONSIVE_172_245), time.time(), "r1")
    run_dir = tmp_path / "r1"
    (run_dir / "logs").mkdir(parents=True)
    write_status(run_dir, RunStatus(run_id="r1", name="job", launcher="ssh", job_file="j.yaml", hosts=["n1"],
                                    world_size=4, state="stopped", created=0.0, started=1.0, ended=30.0,
                                    findings=[LiveFinding.from_dict(f)]))
    r = cockpit(tmp_path, "diagnose", "r1", "--json")
    assert r.returncode == 1, r.stderr
    [ras] = json.loads(r.stdout)["ras"]
    assert (ras["run"], ras["kind"], ras["node"], ras["version"], ras["state"], ras["format"]) == (
        "r1", "stall", "n1", "2.29.1", "answered", "json")
    assert ras["comm_states"] == [{"comm": "0xae94423cfbb2ef4a", "state": "INCOMPLETE"}]
    assert ras["processes"] == [{"state": "unresponsive", "rank": 1, "pid": 1524345, "host": "172.16.64.245"}]
