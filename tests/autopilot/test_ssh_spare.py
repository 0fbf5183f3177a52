"""recover: on ssh: which node the evidence blames (a dead link, a lost node), what is said when no spare is left,
and the next attempt's plan and node scripts with a spare in the blamed node's place (no SSH: the nodes' answers
are given; tests/multinode/test_ssh_recover.py runs it on the lab's real sshd nodes)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cockpit.hang.evidence import Evidence
from cockpit.hang.finding import hang_finding
from cockpit.hang.transport import Endpoint, IfaceState, NodeTransport, RankTransport, TcpSocket, TransportGather
from cockpit.hang.transport_raw import silent
from cockpit.launch import recovery
from cockpit.launch.recovery import Outcome, Policy, blame, decide, link_node, lost_node, stall_outcome
from cockpit.launch.ssh import spare
from cockpit.launch.ssh.plan import NodePlan, SSHPlan, read_plan
from cockpit.preflight.checks import JobFacts
from cockpit.run import layout
from cockpit.run.records import FirstFailure, NodeRecord
from cockpit.run.status import RunStatus
from cockpit.spec.model import parse_spec

POLICY = Policy(attempts=2, on=("failure", "stall"))
JOB = ("name: sp\nscript: demo.py\nworkdir: /srv/jobs\nlauncher: ssh\nnodes: [n1, n2]\ngpus: none\n"
       "env: {GLOO_SOCKET_IFNAME: eth0}\nrecover: {attempts: 2, spare_nodes: [s1, s2]}\n")


def stall(kind: str, node: str | None) -> dict:
    return {"text": "rank 2 waits in allreduce", "culprits": [{"rank": 2, "host": "n2"}], "found": 5.0,
            "link": {"kind": kind, "node": node}}


def test_a_stall_whose_link_finding_names_a_node_blames_that_node_not_the_culprit():
    dead = stall_outcome(stall("dead_link", "n1"))
    assert (dead.host, dead.node, blame(dead)) == ("n2", "n1", ("n1",))
    assert blame(stall_outcome(stall("unreachable", "n1"))) == ("n1",)
    assert blame(stall_outcome(stall("no_single_node", None))) == ()
    assert blame(stall_outcome({"text": "x", "culprits": []})) == ()
    assert link_node({"kind": "dead_link", "node": ""}) is None and link_node("dead_link") is None


def _idle(local: str, peer: str) -> TcpSocket:
    """A connection with nothing queued, no retransmit timer: its rank waits to receive."""
    return TcpSocket(Endpoint(local.rsplit(":", 1)[0], int(local.rsplit(":", 1)[1])),
                     Endpoint(peer.rsplit(":", 1)[0], int(peer.rsplit(":", 1)[1])), "ESTAB", 0, 0, srtt_ms=0.9)


def test_deadlink_a_two_node_stall_blames_the_node_that_alone_did_not_answer_with_nothing_queued_toward_it():
    """The lab's failing run (tests/multinode/test_ssh_recover.py, node1 the master and the slow rank, its link
    down): node3's ranks had sent their part and waited to receive from node1, so none of node3's connections
    to node1 had data queued (no stuck edge), and node1's SSH went down with its link. One node that answered
    is enough to name the one that did not: node1 is blamed and the next attempt runs without it."""
    node3 = NodeTransport("node3", 100.0, (
        RankTransport(2, 4402, (_idle("10.233.31.13:52250", "10.233.31.11:36197"),
                                _idle("10.233.31.13:50182", "10.233.31.11:40769"))),
        RankTransport(3, 4403, (_idle("10.233.31.13:52234", "10.233.31.11:36197"),
                                _idle("10.233.31.13:47072", "10.233.31.11:42783")))),
        ifaces=(IfaceState("ens5", "up", True, 1),), addresses=("10.233.31.13",), source="ss")
    gather = TransportGather((silent("node1"), node3), {"10.233.31.11": "node1", "10.233.31.13": "node3"},
                             {"node1": "eth0", "node3": "ens5"}, waited_s=2.6)
    evidence = {r: Evidence(r, "node3", "", None, {"in": "all_reduce", "since": 90.0}, link=gather) for r in (2, 3)}
    found = hang_finding("stall", 12.0, {}, evidence, 105.0)
    assert found["link"]["kind"] == "unreachable" and found["link"]["node"] == "node1", found.get("link")
    assert "node1's link (eth0) or node1 itself is the likely fault: node1 did not answer the gather while node3 " \
           "did" in found["text"]
    now = stall_outcome({**found, "found": 105.0})
    assert blame(now) == ("node1",)
    d = decide(POLICY, [], now, 0, 2, blame(now), None)
    assert d.retry and d.leave_out == ("node1",), d
    # both silent: no node is singled out, nothing is blamed
    both = TransportGather((silent("node1"), silent("node3")), gather.addr_to_node)
    assert hang_finding("stall", 12.0, {}, {2: replace(evidence[2], link=both)}, 105.0).get("link") is None


def test_a_node_cockpit_lost_is_blamed_and_a_torchrun_that_merely_failed_is_not(tmp_path):
    s = RunStatus("r", "sp", "ssh", "/j.yaml", ["n1", "n2"], 4)
    s.first_failure = FirstFailure(None, "n2", 255, 1.0, "torchrun on n2 (node 1), before any rank failed: gone",
                                   agent=True, node_rank=1)
    s.nodes = [NodeRecord("n1", 0, state="exited"), NodeRecord("n2", 1, state="lost")]
    assert lost_node(s) == "n2" and recovery.failure_outcome(tmp_path, s).node == "n2"
    s.nodes = [NodeRecord("n1", 0, state="exited"), NodeRecord("n2", 1, state="exited")]
    assert lost_node(s) is None
    s.first_failure = replace(s.first_failure, rank=3, agent=False)
    assert lost_node(s) is None


def test_no_spare_left_stops_and_names_the_node_and_the_spares(tmp_path):
    s = _status(tmp_path)
    _write_plan(tmp_path, ("n1", "n2"))
    assert spare.replacement(tmp_path, s, ("n1",)) is None
    _write_plan(tmp_path, ("s1", "n2"), left_out=("n1",))
    assert spare.replacement(tmp_path, s, ("n2",)) is None  # s2 is left
    _write_plan(tmp_path, ("s1", "s2"), left_out=("n1", "n2"))
    blocked = spare.replacement(tmp_path, s, ("s1",))
    assert blocked == "no spare node is left (spare_nodes: s1, s2; in use: s1, s2)"
    out = Outcome("stall", 0, "s1", "stalled: x", node="s1")
    d = decide(POLICY, [], out, 1, 2, ("s1",), blocked, "add a spare to recover.spare_nodes")
    assert not d.retry and d.words == ("not retried: node s1 is to blame and no spare node is left (spare_nodes: s1, "
                                       "s2; in use: s1, s2): stalled: x (fix node s1, or add a spare to "
                                       "recover.spare_nodes, then run the job again)")
    s.recover = {"attempts": 2, "on": ["failure", "stall"], "spare_nodes": []}
    assert spare.replacement(tmp_path, s, ("s1",)) == "no spare node is left (spare_nodes: [])"


def test_a_blamed_node_with_a_spare_is_relaunched_without_it():
    out = Outcome("stall", 0, "n2", "stalled: x", node="n1")
    d = decide(POLICY, [], out, 0, 2, blame(out), None)
    assert d.retry and d.leave_out == ("n1",) and d.words.startswith("relaunched as attempt 1 of 3 without node n1")


def test_the_spare_takes_the_blamed_masters_node_rank_and_the_master_moves_with_it(tmp_path):
    s = _status(tmp_path)
    plan = _write_plan(tmp_path, ("n1", "n2"))
    spec = spare.job_spec(tmp_path, s, plan)
    assert dict(spec.env)["NCCL_DEBUG"] == "INFO" and spec.nprocs == 2  # the shell's, the launch's
    (tmp_path / "commands" / "node-1.sh").write_text("#!/bin/bash\nexport A=1\n# cockpit: recover.apply_fixes: x\n"
                                                     "export NCCL_P2P_DISABLE=1\nexec torchrun\n")
    swap = {"n1": "s1"}
    spec = replace(spec, hosts=("s1", "n2"))
    facts = JobFacts(nodes=[], master_addr="10.0.0.9", master_port=29777, addresses={"s1": "10.0.0.9"},
                     node_checks={"s1": {"shared": True}, "n2": {"shared": True}})
    new = spare._new_plan(tmp_path, plan, spec, facts, swap, (), ("n1",))
    assert [(n.host, n.node_rank, n.address) for n in new.nodes] == [("s1", 0, "10.0.0.9"), ("n2", 1, "10.0.0.2")]
    assert (new.master_addr, new.master_port, new.left_out) == ("10.0.0.9", 29777, ("n1",))
    spare._write_scripts(tmp_path, s, spec, new, 2)
    node0, node1 = (layout.node_script(tmp_path, r).read_text() for r in (0, 1))
    assert "--node-rank=0" in node0 and "COCKPIT_HOST=s1" in node0 and "--master-addr=10.0.0.9" in node0
    assert "--node-rank=1" in node1 and "--master-addr=10.0.0.9" in node1 and "--master-port=29777" in node1
    assert "export NCCL_P2P_DISABLE=1\nexec " in node1  # the fix recover.apply_fixes wrote stays
    assert node0.endswith("  python3 -u demo.py --epochs 3\n")  # the launch's arguments (cockpit run JOB -- ...)


def test_a_blamed_worker_keeps_the_master_and_a_plan_without_the_new_keys_still_reads(tmp_path):
    s = _status(tmp_path)
    plan = _write_plan(tmp_path, ("n1", "n2"))
    spec = replace(spare.job_spec(tmp_path, s, plan), hosts=("n1", "s1"))
    facts = JobFacts(nodes=[], master_addr="10.0.0.1", master_port=29501, addresses={},
                     node_checks={"n1": {"shared": True}, "s1": {"shared": False, "runs_dir": "/r"}})
    new = spare._new_plan(tmp_path, plan, spec, facts, {"n2": "s1"}, (), ("n2",))
    assert new.master_addr == plan.master_addr and new.nodes[1] == NodePlan("s1", 1, f"/r/{tmp_path.name}", False)
    old = plan.to_json().replace('"extra_args"', '"x_extra"').replace('"left_out"', '"x_left"')
    (tmp_path / "commands" / "ssh.json").write_text(old.replace('"shell_env"', '"x_shell"'))
    assert read_plan(tmp_path).left_out == () and read_plan(tmp_path).extra_args == ()


def test_with_min_nodes_a_blamed_node_without_a_spare_is_dropped_and_the_rest_numbered_on(tmp_path):
    s = _status(tmp_path)
    s.recover = {"attempts": 2, "on": ["failure", "stall"], "spare_nodes": [], "min_nodes": 1}
    plan = _write_plan(tmp_path, ("n1", "n2"))
    assert spare.replacement(tmp_path, s, ("n1",)) is None  # one node may go on
    s.recover["min_nodes"] = 2
    assert spare.replacement(tmp_path, s, ("n1",)) == ("no spare node is left (spare_nodes: []), and the run may "
                                                        "not go on with fewer than 2 nodes (recover.min_nodes: 2)")
    spec = replace(spare.job_spec(tmp_path, s, plan), hosts=("n2",), num_nodes=1)
    facts = JobFacts(nodes=[], master_addr="127.0.0.1", master_port=29600, addresses={},
                     node_checks={"n2": {"shared": True}})
    new = spare._new_plan(tmp_path, plan, spec, facts, {}, ("n1",), ("n1",))
    assert [(n.host, n.node_rank) for n in new.nodes] == [("n2", 0)] and new.master_addr == "127.0.0.1"
    spare._write_scripts(tmp_path, s, spec, new, 2)
    script = layout.node_script(tmp_path, 0).read_text()
    assert "--nnodes=1 " in script and "--node-rank=0 " in script and "COCKPIT_HOST=n2" in script
    assert not layout.node_script(tmp_path, 1).exists()  # no node rank 1 any more


def test_keep_fixes_moves_nothing_when_there_is_no_fix():
    assert spare.keep_fixes("#!/bin/bash\nexec a\n", "#!/bin/bash\nexec b\n") == "#!/bin/bash\nexec b\n"


def _status(run_dir: Path) -> RunStatus:
    (run_dir / "job.yaml").write_text(JOB)
    parse_spec(JOB, "job.yaml")  # the job is valid
    return RunStatus("r", "sp", "ssh", str(run_dir / "job.yaml"), ["n1", "n2"], 4,
                     recover={"attempts": 2, "on": ["failure", "stall"], "spare_nodes": ["s1", "s2"]})


def _write_plan(run_dir: Path, hosts: tuple[str, ...], left_out: tuple[str, ...] = ()) -> SSHPlan:
    (run_dir / "commands").mkdir(exist_ok=True)
    nodes = tuple(NodePlan(h, r, str(run_dir), True, f"10.0.0.{r + 1}") for r, h in enumerate(hosts))
    plan = SSHPlan("r", "python3", "10.0.0.1", 29500, nodes, 2, extra_args=("--epochs", "3"),
                   shell_env=(("NCCL_DEBUG", "INFO"),), left_out=left_out)
    (run_dir / "commands" / "ssh.json").write_text(plan.to_json())
    return plan


def test_a_rank_on_two_hosts_reads_as_the_newest_and_a_left_out_hosts_late_exit_is_not_counted(tmp_path):
    import os

    from cockpit.run.store import rank_exits

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank-0.n1.exit").write_text("137 100.0\n")
    (logs / "rank-0.s1.exit").write_text("0 200.0\n")
    os.utime(logs / "rank-0.n1.exit", (1000, 1000))
    os.utime(logs / "rank-0.s1.exit", (2000, 2000))
    assert layout.rank_files(tmp_path, "exit")[0][0] == "s1"
    os.utime(logs / "rank-0.n1.exit", (3000, 3000))  # the cut-off node's rank ended late, after the relaunch
    assert rank_exits(tmp_path)[0].host == "n1"
    assert rank_exits(tmp_path, skip=frozenset({"n1"}))[0].host == "s1"  # the supervisor leaves it out


def test_a_stopping_run_waits_for_an_unreachable_node_unless_the_stall_blames_it(tmp_path):
    """The teardown of a stalled attempt waits up to Timing.give_up (60 s) for a node it cannot reach; the node
    the stall's link finding blames is given up on at once (the next attempt runs without it), as the stop's
    doing, not as a failure of the node's own."""
    import asyncio

    from cockpit.launch.protocol import GivesUp
    from cockpit.launch.ssh.unit import SSHRun
    from cockpit.remote import Unreachable

    class Cut:
        async def stream(self, command):
            raise Unreachable("a", "no route to host")

    plan = SSHPlan("r-1", "/opt/py", "10.0.0.1", 29500, (NodePlan("a", 0, str(tmp_path), True),), 1)
    run = SSHRun(RunStatus("r-1", "t", "ssh", "/j.yaml", ["a"], 1), tmp_path, plan)
    run.remote = lambda host: Cut()
    run.agent = lambda command, host, args: "agent"
    [node] = run.nodes
    node.pid, run.stopping = 1, "stop"
    assert isinstance(node, GivesUp)

    async def go() -> None:
        follow = asyncio.ensure_future(node.follow())
        while node.unreachable_since is None:  # the first reconnect failed
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # a look later: still waiting (60 s to go)
        assert not follow.done() and not node.done
        node._give_up("blamed")
        await asyncio.wait_for(follow, 5)

    try:
        asyncio.run(asyncio.wait_for(go(), 10))
    finally:
        run.loop.close()
    assert (node.state, node.exit_code) == ("lost", 255)
    assert "while stopping the run, given up on (blamed): its processes may still be running there" in node.note
    assert run.node_failure is None
