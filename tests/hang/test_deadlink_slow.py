"""deadlink (issue 31), the slow link while a run trains: when the slow-link watch gathers (cockpit.hang.linkwatch),
which pair of gathers names a node, and the straggler finding's words (cockpit.hang.slowwords). The gathers are the
recorded 4-namespace lab snapshots (tests/fixtures/deadlink/tcp: throttle = tbf 1 Mbit/s on n2, healthy), and a
3-node ring built here, where the slow node's connections are most of those that carry data."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from dataclasses import replace

from hang.deadlink_fixture import raw_nodes
from helpers import wait_for

from cockpit.hang import linkwatch
from cockpit.hang.linkfind import LinkFinding, link_finding
from cockpit.hang.linkwatch import PAIR_EVERY_S, PAIR_MIN_GAP_S, LinkWatch, Pair, due, signs, slow_link
from cockpit.hang.slowwords import network_finding
from cockpit.hang.transport import Endpoint, NodeTransport, RankTransport, TcpSocket, TransportGather
from cockpit.hang.transport_raw import node_transport
from cockpit.launch.ssh.shell import agent_source
from cockpit.run.progress import RankProgress


def gather(scenario: str, label: str, taken_at: float = 0.0) -> TransportGather:
    return TransportGather(tuple(node_transport({**r, "time": taken_at}, f"{scenario}/{label}")
                                 for r in raw_nodes(scenario, label)))


def ranks(hosts: dict[int, str], wait: float = 0.9, rate: float | None = 1.0) -> dict[int, RankProgress]:
    return {r: RankProgress(h, "running", rate=rate, wait=wait) for r, h in hosts.items()}


FOUR = {0: "n0", 1: "n1", 2: "n2", 3: "n3"}


def ring3(rtt_b: float, sent: int, t: float, rtt: float = 0.2, loopback: bool = False) -> tuple[NodeTransport, ...]:
    """Three nodes a, b, c, one rank each, a socket per ordered pair; the ones with b at an end have ``rtt_b``,
    the others ``rtt``; with ``loopback``, each rank also has a busy socket to its own node (127.0.0.1)."""
    addr = {"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.0.3"}
    out = []
    for rank, host in enumerate(addr):
        socks = tuple(TcpSocket(Endpoint(addr[host], 40000 + i), Endpoint(addr[peer], 50000 + rank), "ESTAB", 0, 0,
                                srtt_ms=rtt_b if "b" in (host, peer) else rtt, bytes_acked=sent, retransmits=3)
                      for i, peer in enumerate(p for p in addr if p != host))
        socks += (TcpSocket(Endpoint("127.0.0.1", 41000), Endpoint("127.0.0.1", 29500), "ESTAB", 0, 0, srtt_ms=0.03,
                            bytes_acked=sent),) if loopback else ()
        out.append(NodeTransport(host, t, (RankTransport(rank, 100 + rank, socks),), addresses=(addr[host],)))
    return tuple(out)


def test_deadlink_slow_link_in_a_three_node_ring_names_the_node_whose_connections_are_most():
    """4 of the 6 connections that carry data touch b: their median is slow, so the baseline is the lower
    quartile of the others (the median named nobody here)."""
    f = link_finding(ring3(180.0, 2_000_000, 3.0), {}, earlier=[ring3(180.0, 1_000_000, 0.0)], job_iface={"b": "eth0"})
    assert isinstance(f, LinkFinding) and (f.kind, f.node, f.iface) == ("slow_link", "b", "eth0")
    slow = {(r.observer, r.peer_node) for r in f.table if r.kind == "slow"}
    assert slow == {("a", "b"), ("b", "a"), ("b", "c"), ("c", "b")}, f.table


def test_deadlink_slow_link_healthy_three_node_ring_is_no_finding():
    assert link_finding(ring3(0.3, 2_000_000, 3.0), {}, earlier=[ring3(0.3, 1_000_000, 0.0)]) is None


def test_deadlink_slow_link_baseline_is_other_nodes_not_loopback():
    """22 ms against 2.5 ms between other nodes is under 10x: not slow, however fast the sockets within a node."""
    later, first = ring3(22.0, 2_000_000, 3.0, 2.5, True), ring3(22.0, 1_000_000, 0.0, 2.5, True)
    assert link_finding(later, {}, earlier=[first]) is None
    assert link_finding(ring3(30.0, 2_000_000, 3.0, 2.5, True), {}, earlier=[first]).node == "b"  # 12x


def test_deadlink_slow_signs_suspect_slowed_waiting():
    assert signs(ranks(FOUR, wait=0.1, rate=10.0), 10.0, False) == frozenset()
    assert signs(ranks(FOUR, wait=0.1, rate=10.0), 10.0, True) == {"suspect"}
    assert signs(ranks(FOUR, wait=0.1, rate=4.0), 10.0, False) == {"slowed"}  # half the best rate or less
    assert signs(ranks(FOUR, wait=0.1, rate=None), 10.0, False) == {"slowed"}  # not 2 steps in a window
    assert signs(ranks(FOUR, wait=0.1, rate=None), None, False) == frozenset()  # no rate yet: nothing to compare
    assert signs(ranks(FOUR, wait=0.6, rate=10.0), 10.0, False) == {"waiting"}
    exited = {r: replace(p, state="exited") for r, p in ranks(FOUR, wait=0.9, rate=0.1).items()}
    assert signs(exited, 10.0, False) == frozenset()  # the ranks that ended say nothing of the run's speed


def test_deadlink_slow_due_is_bounded():
    assert not due(0.0, frozenset(), None, frozenset())  # no sign: no gather
    assert due(0.0, frozenset({"waiting"}), None, frozenset())  # the first sign: a pair now
    assert not due(PAIR_MIN_GAP_S + 1, frozenset({"waiting"}), 0.0, frozenset({"waiting"}))  # the same sign
    assert due(PAIR_EVERY_S, frozenset({"waiting"}), 0.0, frozenset({"waiting"}))  # ... until PAIR_EVERY_S
    assert not due(PAIR_MIN_GAP_S - 1, frozenset({"waiting", "slowed"}), 0.0, frozenset({"waiting"}))
    assert due(PAIR_MIN_GAP_S, frozenset({"waiting", "slowed"}), 0.0, frozenset({"waiting"}))  # a new sign


def test_deadlink_slow_throttle_pair_is_the_network_straggler_finding():
    pair = Pair(gather("throttle", "t10s", 1000.0), gather("throttle", "t30s", 1020.0), 1000.0, 1020.5)
    f = slow_link(pair)
    assert f is not None and (f.node, f.iface) == ("n2", "eth0")
    hosts = ranks(FOUR)
    hosts[2] = replace(hosts[2], wait=0.8)
    found = network_finding(f, pair, 995.0, hosts, "r1")
    assert (found["kind"], found["rank"], found["host"]) == ("straggler", 2, "n2")
    assert found["text"].startswith("rank 2 (n2)'s wait is network: its connections run at ")
    assert " Mbit/s with " in found["text"] and " ms RTT and " in found["text"] and ", the others' at " in found["text"]
    assert "n2's link (eth0) is slow (its connections to n1, n3)" in found["text"]
    assert "it waits 80% of the time in collectives, the others 90%" in found["text"]
    assert "--exclude n2" in found["hint"] and "tc qdisc show dev eth0" in found["hint"]
    assert found["link"]["kind"] == "slow_link" and found["link"]["ranks"] == [2]
    assert (found["began"], found["found"]) == (995.0, 1020.5)
    # the recorded throttle: each ring socket through n2 acked at most ~1 Mbit/s (tbf rate 1mbit)
    assert 100_000 < found["link"]["send_bps"] < 2_000_000, found["link"]["send_bps"]


def test_deadlink_slow_healthy_pair_is_no_finding():
    pair = Pair(gather("healthy", "before", 0.0), gather("healthy", "t10s", 10.0), 0.0, 10.0)
    assert slow_link(pair) is None


class Gathers:
    """links() for LinkWatch: hands out the given gathers in turn, counting the calls."""

    def __init__(self, *gathers: TransportGather):
        self.gathers, self.calls, self.lock = list(gathers), 0, threading.Lock()

    def __call__(self) -> TransportGather:
        with self.lock:
            self.calls += 1
            return self.gathers[min(self.calls, len(self.gathers)) - 1]


def test_deadlink_slow_watch_gathers_a_pair_and_holds_the_finding():
    links = Gathers(gather("throttle", "t10s", 0.0), gather("throttle", "t30s", 20.0))
    now = [100.0]
    watch = LinkWatch(links, clock=lambda: now[0], gap=0.0)
    watch.look(ranks(FOUR, wait=0.1), False, running=True)
    assert links.calls == 0  # no sign: nothing gathered
    watch.look(ranks(FOUR, wait=0.9), False, running=True)
    wait_for(lambda: watch.current() is not None, 30, "the pair's finding")
    assert links.calls == 2 and watch.current()[0].node == "n2"
    said = watch.said()
    assert (said["pairs"], said["gathers"], said["signs"]) == (1, 2, ["waiting"]), said
    now[0] += 1.0
    watch.look(ranks(FOUR, wait=0.9), False, running=True)
    assert links.calls == 2  # the same sign, within PAIR_EVERY_S: no new pair
    now[0] += linkwatch.CLEAR_S + 1
    watch.look(ranks(FOUR, wait=0.1), False, running=True)
    assert watch.current() is None  # no sign for CLEAR_S: the run is not slow any more


def test_deadlink_slow_watch_healthy_pair_finds_nothing_and_stall_gathers_nothing():
    links = Gathers(gather("healthy", "before", 0.0), gather("healthy", "t10s", 10.0))
    watch = LinkWatch(links, clock=lambda: 0.0, gap=0.0)
    watch.look(ranks(FOUR, wait=0.9), False, running=False)  # starting or stalled: the stall's gather, not ours
    assert links.calls == 0
    watch.look(ranks(FOUR, wait=0.9), True, running=True)
    wait_for(lambda: links.calls == 2 and not watch._thread.is_alive(), 30, "the pair")
    assert watch.current() is None


def test_deadlink_slow_watch_survives_a_failing_gather():
    def broken() -> TransportGather:
        raise OSError("ssh: connection refused")

    watch = LinkWatch(broken, clock=lambda: 0.0, gap=0.0)
    watch.look(ranks(FOUR, wait=0.9), False, running=True)
    wait_for(lambda: watch.errors, 30, "the error")
    assert watch.current() is None and "connection refused" in watch.errors[0]


HOLDER = """
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
c.sendall(b"x" * 1000)
print("connected", flush=True)
sys.stdin.read()
"""


def test_deadlink_slow_agent_links_reads_running_ranks_sockets_and_leaves_them_alone(tmp_path):
    """The agent's `links` (as shipped to nodes: one `python -c` program): a running rank's sockets, none of an
    exited one's, and nothing written to the ranks' files (no stacks request, no marker)."""
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    rank = subprocess.Popen([sys.executable, "-c", HOLDER, str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert rank.stdout.readline().strip() == "connected"
        logs = tmp_path / "logs"
        logs.mkdir()
        (logs / "rank-0.hostA.pid").write_text(f"{rank.pid}\n")
        (logs / "rank-1.hostA.pid").write_text(f"{rank.pid}\n")
        (logs / "rank-1.hostA.exit").write_text("0 1.0\n")
        before = sorted(p.name for p in logs.iterdir())
        args = {"run_dir": str(tmp_path), "host": "hostA"}
        out = subprocess.run([sys.executable, "-c", agent_source(), "links", json.dumps(args)], capture_output=True,
                             text=True, timeout=60)
        [line] = [json.loads(x) for x in out.stdout.splitlines()]
        node = node_transport(line["transport"], "hostA")
        assert [r.rank for r in node.ranks] == [0]
        [s] = [s for s in node.sockets if s.peer.port == port]
        assert (s.state, s.peer.host, node.ranks[0].pid) == ("ESTAB", "127.0.0.1", rank.pid)
        assert sorted(p.name for p in logs.iterdir()) == before  # no dump.req, no .stacks marker
        assert rank.poll() is None
    finally:
        rank.stdin.close()
        rank.wait(10)
        srv.close()


def test_deadlink_slow_watch_backs_off_while_the_same_signs_find_nothing():
    """A healthy gloo run on CPUs waits most of its time (a sign all along): pairs after 60, 120, 240 ... s,
    capped; a new sign makes a pair at once and starts over."""
    links = Gathers(gather("healthy", "before", 0.0), gather("healthy", "t10s", 10.0))
    now = [0.0]
    watch = LinkWatch(links, clock=lambda: now[0], gap=0.0)
    began = []
    for t in range(0, 4000, 5):
        now[0] = float(t)
        pairs = watch.pairs
        watch.look(ranks(FOUR, wait=0.9, rate=10.0), False, running=True)
        if watch.pairs > pairs:
            began.append(t)
            wait_for(lambda: not watch._thread.is_alive(), 30, "the pair")
    assert began == [0, 60, 180, 420, 900, 1860, 2820, 3780], began  # doubling up to PAIR_EVERY_MAX_S (960)
    now[0] += 20.0
    watch.look(ranks(FOUR, wait=0.9, rate=1.0), False, running=True)  # slowed: a new sign
    assert watch.pairs == len(began) + 1 and watch.said()["every_s"] == linkwatch.PAIR_EVERY_S
