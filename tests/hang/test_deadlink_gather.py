"""deadlink (issue 31), gathering: the node agent's transport line (a real process and its real TCP socket),
the gather of a run's nodes (one silent), and the hang finding and stacks report that carry the link finding."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

from hang.deadlink_fixture import raw_nodes

from cockpit.hang.evidence import Evidence
from cockpit.hang.finding import hang_finding, stacks_report
from cockpit.hang.transport_raw import node_transport
from cockpit.hang.transportgather import gather_of, job_iface
from cockpit.launch.ssh.shell import agent_source
from cockpit.run.findings import LiveFinding

HOLDER = """
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
c.sendall(b"x" * 1000)
print("connected", flush=True)
sys.stdin.read()
"""


def test_deadlink_agent_stacks_sends_the_ranks_sockets(tmp_path):
    """The agent (as shipped to nodes: one `python -c` program) reads a live rank's sockets from /proc and ss."""
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    rank = subprocess.Popen([sys.executable, "-c", HOLDER, str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert rank.stdout.readline().strip() == "connected"
        logs = tmp_path / "logs"
        logs.mkdir()
        (logs / "rank-0.hostA.pid").write_text(f"{rank.pid}\n")
        (logs / "rank-0.hostA.stacks").write_text("")
        args = {"run_dir": str(tmp_path), "host": "hostA", "request": "1.0", "marker": "#\n", "timeout": 0.3,
                "transport": True}
        out = subprocess.run([sys.executable, "-c", agent_source(), "stacks", json.dumps(args)], capture_output=True,
                             text=True, timeout=60)
        lines = [json.loads(line) for line in out.stdout.splitlines()]
        [raw] = [a["transport"] for a in lines if "transport" in a]
        node = node_transport(raw, "hostA")
        [s] = [s for s in node.sockets if s.peer.port == port]
        assert (s.state, s.peer.host, node.ranks[0].pid) == ("ESTAB", "127.0.0.1", rank.pid)
        from cockpit.launch.ssh.stacks import rank_answers

        assert [a["rank"] for a in rank_answers(lines)] == [0]  # and the stacks answer, in the node's one message
    finally:
        rank.stdin.close()
        rank.wait(10)
        srv.close()


def test_deadlink_gather_lists_the_node_that_gave_nothing_as_silent():
    [n1, _, n3] = [r for r in raw_nodes("linkdown", "t10s") if r["host"] != "n0"]
    g = gather_of([("n1", "10.235.31.11"), ("n2", "10.235.31.12"), ("n3", "10.235.31.13")],
                  [[{"rank": 1}, {"transport": n1}], [], [{"transport": n3}]],
                  {"n2": "export GLOO_SOCKET_IFNAME=eth0\n"})
    assert g.silent == ("n2",) and g.addr_to_node["10.235.31.12"] == "n2" and g.job_iface == {"n2": "eth0"}
    g = gather_of([("n1", None)], [[{"transport": {"host": "n1", "ranks": "bad"}}]])
    assert g.silent == ("n1",) and g.errors and g.errors[0].startswith("n1:")
    assert job_iface("export NCCL_SOCKET_IFNAME=eth0,eth1\n") is None
    assert job_iface("export GLOO_SOCKET_IFNAME=eth0\nexport GLOO_SOCKET_IFNAME='ens5'\n") == "ens5"


def _evidence(scenario: str) -> dict[int, Evidence]:
    raws = raw_nodes(scenario, "t10s")
    gone = scenario in ("linkdown", "nslinkdown")  # n2's link down: its agent cannot answer either
    answers = [[] if gone and r["host"] == "n2" else [{"transport": r}] for r in raws]
    g = gather_of([(r["host"], r["addresses"][0]) for r in raws], answers, {})
    stack = 'Thread 0x1 (most recent call first):\n  File "/x/train.py", line 9 in step\n'
    return {i: Evidence(i, f"n{i}", stack if i != 2 else "", None, {"in": "all_reduce"}, (), g) for i in range(4)}


def test_dead_link_finding_is_in_the_stall_text_and_status_json():
    f = hang_finding("stall", 12.0, {}, _evidence("linkdown"), time.time(), "RUN1")
    link = f["link"]
    assert (link["kind"], link["node"], link["silent"]) == ("dead_link", "n2", ["n2"])
    assert "; n2's link is the likely fault: its connections to n1 and n3 have 192 B unacked" in f["text"]
    assert f["hint"].startswith("check n2's port") and "--exclude n2" in f["hint"]
    assert {r["observer"] for r in link["table"] if r["kind"] == "stuck"} == {"n1", "n3"}
    live = LiveFinding.from_dict(f)
    assert live.link == link and live.to_dict()["link"] == link  # status.json keeps it, byte for byte
    report = stacks_report(_evidence("linkdown"))
    rows = report.split("== links ==\n", 1)[1].splitlines()
    assert rows[2] == "link n2: silent, no answer (unreachable: its link may be down)"
    assert rows[4].startswith("n2's link is the likely fault")


def test_symmetric_hang_in_own_code_gets_no_link_key():
    f = hang_finding("stall", 12.0, {}, _evidence("ownhang"), time.time(), "RUN1")
    assert "link" not in f and "link" not in f["text"]
    assert "no connection is stuck or slow: no link finding" in stacks_report(_evidence("ownhang"))


def test_deadlink_diagnose_json_carries_the_connection_table(tmp_path):
    """`cockpit diagnose RUN --json`: the stall's link finding with its per-connection table, as status.json has it."""
    from hang.test_local_hangs import cockpit

    from cockpit.run.store import RunStatus, write_status

    f = hang_finding("stall", 12.0, {}, _evidence("linkdown"), time.time(), "r1")
    run_dir = tmp_path / "r1"
    (run_dir / "logs").mkdir(parents=True)
    write_status(run_dir, RunStatus(run_id="r1", name="job", launcher="ssh", job_file="j.yaml", hosts=["n1"],
                                    world_size=4, state="stopped", created=0.0, started=1.0, ended=30.0,
                                    findings=[LiveFinding.from_dict(f)]))
    r = cockpit(tmp_path, "diagnose", "r1", "--json")
    assert r.returncode == 1, r.stderr
    [link] = json.loads(r.stdout)["links"]
    assert (link["run"], link["kind"], link["finding"], link["node"]) == ("r1", "dead_link", "stall", "n2")
    stuck = [row for row in link["table"] if row["kind"] == "stuck"]
    assert {(row["observer"], row["peer_node"]) for row in stuck} == {("n1", "n2"), ("n3", "n2")}
    assert all(row["send_q"] > 0 and row["backoff"] >= 3 for row in stuck)


def test_deadlink_gather_deadline_lists_a_node_without_ssh_as_silent_before_its_connect_timeout(tmp_path):
    """An ssh run's gather (cockpit.launch.ssh.stacks) across a node reached locally, whose agent answers with
    its rank's socket, and a node whose "sshd" accepts the TCP connection and never speaks (as a node whose
    link went down after its SYN was answered, or a hung sshd): SSH's connect timeout is 60 s, the gather gives
    the silent node up soon after the other answered (cockpit.launch.ssh.stacks.gather_over), lists it as
    silent and says how long it waited."""
    from cockpit.launch.ssh.plan import PLAN_FILE, NodePlan, SSHPlan
    from cockpit.launch.ssh.stacks import GATHER_CONNECT_MAX_S, collect
    from cockpit.remote import SSHOptions

    mute = socket.create_server(("127.0.0.1", 0))  # listens: the kernel completes the handshake, nobody accepts
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    config = tmp_path / "ssh_config"
    config.write_text(f"Host deadnode\n  HostName 127.0.0.1\n  Port {mute.getsockname()[1]}\n")
    rank = subprocess.Popen([sys.executable, "-c", HOLDER, str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert rank.stdout.readline().strip() == "connected"
        run_dir = tmp_path / "run"
        (run_dir / "logs").mkdir(parents=True)
        (run_dir / "logs" / "rank-0.localhost.pid").write_text(f"{rank.pid}\n")
        (run_dir / "logs" / "rank-0.localhost.stacks").write_text("")
        plan = SSHPlan("R", sys.executable, "127.0.0.1", 29500,
                       (NodePlan("localhost", 0, str(run_dir), True, "127.0.0.1"),
                        NodePlan("deadnode", 1, "/nonexistent/run", False, "127.0.0.9")), 1,
                       SSHOptions(config=(str(config),), connect_timeout=60.0, agent=False))
        (run_dir / PLAN_FILE).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / PLAN_FILE).write_text(plan.to_json())
        evidence = collect(run_dir, None, None, 0.5)  # type: ignore[arg-type]  # the status is not read
    finally:
        rank.stdin.close()
        rank.wait(10)
        srv.close()
        mute.close()
    link = evidence[0].link
    assert link is not None and link.silent == ("deadnode",), link
    assert link.waited_s is not None and link.waited_s <= GATHER_CONNECT_MAX_S + 5 < 60, link.waited_s
    [local] = [n for n in link.nodes if n.host == "localhost"]
    assert any(s.peer.port == port for s in local.sockets)
    from cockpit.hang.linkwords import link_lines

    assert f"link deadnode: silent, no answer within {link.waited_s:.1f} s" in "\n".join(link_lines(link))


def test_deadlink_gather_deadline_waits_for_a_connected_node_and_gives_up_an_unconnected_one():
    from cockpit.launch.ssh.stacks import GATHER_CONNECT_MAX_S, GATHER_GRACE_S, gather_over

    assert gather_over(0.2, [], None)  # everyone answered
    assert not gather_over(30.0, [True, False], 1.0)  # a node connected and working: slow, not dead
    assert not gather_over(GATHER_CONNECT_MAX_S - 1, [False], None)  # nobody answered yet: no grounds
    assert gather_over(GATHER_CONNECT_MAX_S, [False], None)
    assert not gather_over(0.5 + GATHER_GRACE_S / 2, [False], 0.5)  # the connected one answered: a grace
    assert gather_over(0.5 + GATHER_GRACE_S, [False, False], 0.5)
    assert not gather_over(3.0 + 2.5, [False], 3.0)  # it took 3 s (a loaded machine): as long again
    assert gather_over(3.0 + 3.0, [False], 3.0)
