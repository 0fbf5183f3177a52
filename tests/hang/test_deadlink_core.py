"""deadlink (issue 31), the pure core: parsers on the recorded fixtures (tests/fixtures/deadlink/) and the link
finding on every recorded scenario of the 4-namespace gloo lab (dead link, own-NIC down, throttle, a rank hung
in its own code, a stopped rank, healthy, two nodes)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from hang.deadlink_fixture import TCP, raw_nodes

from cockpit.hang.linkfind import STUCK_BACKOFF, LinkFinding, NoSingleNode, classify, link_finding
from cockpit.hang.linkwords import link_dict, link_text, node_rows
from cockpit.hang.transport import Endpoint, NodeTransport, RankTransport, TcpSocket
from cockpit.hang.transport_parse import (
    TransportParseError,
    parse_ib_port,
    parse_proc_net_tcp,
    parse_ss,
)
from cockpit.hang.transport_raw import node_transport, silent

SOURCES = ("ss", "proc")


def nodes(scenario: str, label: str, source: str = "ss") -> list[NodeTransport]:
    return [node_transport(r, f"{scenario}/{label}") for r in raw_nodes(scenario, label, source)]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("scenario,label", [("linkdown", "t03s"), ("linkdown", "t10s"), ("linkdown", "t60s"),
                                            ("nslinkdown", "t10s")])
def test_dead_link_names_n2_and_its_interface(scenario, label, source):
    f = link_finding(nodes(scenario, label, source), {})
    assert isinstance(f, LinkFinding) and (f.kind, f.node, f.iface) == ("dead_link", "n2", "eth0")
    observers = {e.observer for e in f.edges if e.peer == "n2"}
    assert observers == {"n1", "n3"}  # n2's ring neighbours, both with data queued toward it
    assert all(e.queued_bytes > 0 and e.backoff_max >= STUCK_BACKOFF for e in f.edges if e.peer == "n2")
    assert any("n2's eth0 is down" in c for c in f.corroboration)
    assert re.fullmatch(r"n2's link \(eth0\) is the likely fault: its connections to n1 and n3 have 192 B unacked, "
                        r"\d+ retransmissions \(backoff [3-8]\), none stuck between other pairs", link_text(f))


def test_deadlink_without_the_dead_nodes_answer_still_names_it():
    """In the lab the dead node is unreachable over SSH too: the neighbours' sockets alone name it."""
    found = [n for n in nodes("linkdown", "t10s") if n.host != "n2"] + [silent("n2")]
    f = link_finding(found, {"10.235.31.12": "n2"})
    assert isinstance(f, LinkFinding) and f.node == "n2" and f.iface is None
    assert f.corroboration == ("n2 did not answer the gather",)
    f = link_finding(found, {}, job_iface={"n2": "eth0"})  # no address map: the address stands for the node
    assert isinstance(f, LinkFinding) and f.node == "10.235.31.12"


def test_deadlink_a_node_alone_silent_with_nothing_queued_toward_it_is_named_unconfirmed():
    """Its neighbours may have had nothing queued toward it when its link went (they wait to receive): the node
    that alone did not answer is named, and the words say TCP does not confirm it. Two silent: no finding."""
    quiet = [n for n in nodes("healthy", "t10s") if n.host != "n2"] + [silent("n2")]
    f = link_finding(quiet, {}, job_iface={"n2": "eth0"})
    assert isinstance(f, LinkFinding) and (f.kind, f.node, f.iface, f.edges) == ("unreachable", "n2", "eth0", ())
    assert f.corroboration == ("n2 did not answer the gather while n0, n1, n3 did",)
    assert link_text(f) == ("n2's link (eth0) or n2 itself is the likely fault: n2 did not answer the gather while "
                            "n0, n1, n3 did; no connection shows data queued toward it, so TCP does not confirm it")
    assert link_finding([n for n in quiet if n.host not in ("n1", "n2")] + [silent("n1"), silent("n2")], {}) is None


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("scenario,label", [("ownhang", "t10s"), ("ownhang", "t30s"), ("sigstop", "t10s"),
                                            ("sigstop", "t30s"), ("healthy", "before"), ("healthy", "t10s")])
def test_symmetric_hang_without_a_link_fault_gets_no_link_finding(scenario, label, source):
    assert link_finding(nodes(scenario, label, source), {}) is None


@pytest.mark.parametrize("scenario,first,second", [("ownhang", "t10s", "t30s"), ("sigstop", "t10s", "t30s"),
                                                   ("healthy", "before", "t10s")])
def test_deadlink_two_gathers_of_a_non_link_hang_find_nothing_slow(scenario, first, second):
    assert link_finding(nodes(scenario, second), {}, earlier=[nodes(scenario, first)]) is None


def test_deadlink_throttled_node_is_the_slow_link_over_two_gathers():
    f = link_finding(nodes("throttle", "t30s"), {}, earlier=[nodes("throttle", "t10s")])
    assert isinstance(f, LinkFinding) and (f.kind, f.node) == ("slow_link", "n2")
    assert {frozenset((e.observer, e.peer)) for e in f.edges} == {frozenset(("n1", "n2")), frozenset(("n2", "n3"))}
    assert all(e.srtt_ms is not None and e.srtt_ms > 100 for e in f.edges)
    healthy = [r.srtt_ms for r in f.table if r.kind != "slow" and r.srtt_ms is not None]
    assert max(healthy) < 20
    assert "n2's link (eth0) is slow" in link_text(f) or "n2's link is slow" in link_text(f)


def test_deadlink_throttle_from_one_gather_is_no_finding():
    """One sample per socket is not enough (single samples: throttled down to 27 ms, healthy up to 8 ms)."""
    assert link_finding(nodes("throttle", "t10s"), {}) is None


def test_deadlink_two_nodes_need_node_local_evidence_to_pick_an_end():
    both = nodes("linkdown-2nodes", "t10s")
    f = link_finding(both, {})
    assert isinstance(f, LinkFinding) and f.node == "n1"  # its eth0 is down, no carrier; n0's is up
    assert {(e.observer, e.peer) for e in f.edges} == {("n0", "n1"), ("n1", "n0")}  # both ends retransmit
    blind = [replace(n, ifaces=()) for n in both]
    f = link_finding(blind, {})
    assert isinstance(f, NoSingleNode) and f.pair == ("n0", "n1")
    assert link_text(f).startswith("the link between n0 and n1 is the likely fault")
    assert link_dict(f)["node"] is None and link_dict(f)["table"]
    f = link_finding([blind[0], silent("n1")], {"10.235.31.11": "n1"})
    assert isinstance(f, LinkFinding) and f.node == "n1"  # the end that does not answer


def _sock(local: str, peer: str, backoff: int) -> TcpSocket:
    return TcpSocket(Endpoint(local, 1000), Endpoint(peer, 2000), "ESTAB", 96, 0, "on", backoff)


def test_deadlink_two_faults_name_no_node_and_keep_the_table():
    a = NodeTransport("a", 0.0, (RankTransport(0, 1, (_sock("10.0.0.1", "10.0.0.2", 5),)),), addresses=("10.0.0.1",))
    c = NodeTransport("c", 0.0, (RankTransport(2, 3, (_sock("10.0.0.3", "10.0.0.4", 4),)),), addresses=("10.0.0.3",))
    f = link_finding([a, c], {"10.0.0.2": "b", "10.0.0.4": "d"})
    assert isinstance(f, NoSingleNode) and f.pair is None and "no node in common" in f.reason
    d = link_dict(f)
    assert d["kind"] == "no_single_node" and d["node"] is None and len(d["table"]) == 2


def test_deadlink_classify_thresholds():
    s = _sock("10.0.0.1", "10.0.0.2", STUCK_BACKOFF)
    assert classify(s) == "stuck"
    assert classify(replace(s, backoff=STUCK_BACKOFF - 1)) == "busy"  # healthy and throttled never passed 1
    assert classify(replace(s, send_q=0, timer="none", backoff=0)) == "idle"
    assert classify(replace(s, timer="persist")) == "busy"


def test_deadlink_ss_timer_forms_and_ss_vs_proc():
    ss = parse_ss((TCP / "linkdown" / "t60s" / "n1.ss-tinpoem.txt").read_text())
    stuck = [s for s in ss if s.backoff and s.backoff >= 3]
    assert [(s.peer.host, s.send_q, s.timer, s.backoff) for s in stuck] == [("10.235.31.12", 96, "on", 8)]
    proc = parse_proc_net_tcp((TCP / "linkdown" / "t60s" / "n1.proc-net-tcp.txt").read_text())
    [p] = [s for s in proc if s.inode == stuck[0].inode]
    assert (p.send_q, p.timer, p.backoff) == (96, "on", 8)
    six = parse_proc_net_tcp((TCP / "linkdown" / "t10s" / "n1.proc-net-tcp6.txt").read_text())
    assert [str(s.peer) for s in six] == ["10.235.31.10:29532"]  # ::ffff:a.b.c.d is the IPv4 node
    line = "ESTAB 0 96 10.0.0.1:5 10.0.0.2:6 timer:(on,,4) ino:7 <->\n\t rto:3264 backoff:4 lastack:900\n"
    [s] = parse_ss(line)
    assert (s.timer, s.backoff, s.inode, s.rto_ms, s.lastack_ms) == ("on", 4, 7, 3264.0, 900)


@pytest.mark.parametrize("bad", ["ESTAB x y 1.2.3.4:5 6.7.8.9:1\n", "BOGUS 0 0 1.2.3.4:5 6.7.8.9:1\n",
                                 "ESTAB 0 0 nowhere nothing\n"])
def test_deadlink_bad_ss_is_a_clear_error(bad):
    with pytest.raises(TransportParseError) as e:
        parse_ss("State Recv-Q Send-Q\n" + bad, "n1 ss")
    assert str(e.value).startswith("n1 ss:2: ") and "hint:" in str(e.value)


@pytest.mark.parametrize("bad", [None, [], {"host": 3}, {"host": "a", "ranks": {}}, {"host": "a", "ranks": [{}]},
                                 {"host": "a", "ranks": [{"rank": 0, "tcp": "  0: zz:1 00:0 01 x\n"}]},
                                 {"host": "a", "ifaces": {"eth0": "up"}}, {"host": "a", "ib": {"mlx5_0": {}}}])
def test_deadlink_bad_agent_record_is_a_clear_error(bad):
    with pytest.raises(TransportParseError) as e:
        node_transport(bad, "node7")
    assert str(e.value).startswith("node7")


def test_deadlink_ib_ports_from_sysfs_fixtures():
    base = TCP.parent / "ib" / "gpud-sys-class-infiniband-h100"
    for device, layer in (("mlx5_0", "InfiniBand"), ("mlx5_bond_0", "Ethernet")):
        port = base / device / "ports" / "1"
        files = {p.relative_to(port).as_posix(): p.read_text() for p in port.rglob("*")
                 if p.is_file() and "hw_counters" not in p.parts}
        ib = parse_ib_port(device, 1, files)
        assert ib.active is True and ib.link_layer == layer and ib.phys_state == "5: LinkUp"
        assert isinstance(ib.counters["link_downed"], int) and isinstance(ib.counters["port_xmit_wait"], int)
    na = parse_ib_port("i40iw0", 1, {"state": "1: DOWN", "counters/link_downed": "N/A (no PMA)"})
    assert na.active is False and na.counters == {"link_downed": None}
    node = NodeTransport("h", 0.0, ib_ports=(na,))
    from cockpit.hang.linkfind import local_faults

    assert local_faults("h", node, None) == ("h's i40iw0 port 1 is 1: DOWN (?)",)


def test_deadlink_node_rows_say_each_nodes_link_state():
    found = [n for n in nodes("linkdown", "t10s") if n.host != "n2"] + [silent("n2")]
    f = link_finding(found, {"10.235.31.12": "n2"})
    assert f is not None
    rows = node_rows(found, f.table)
    assert rows[0].startswith("link n0: eth0 up; connections: ")
    assert rows[1] == "link n1: eth0 up; connections: 1 stuck, 3 idle (ss)"  # gloo x2, the store
    assert rows[2] == "link n2: silent, no answer (unreachable: its link may be down)"
