"""A Slurm rank's own transport evidence (issue 31): the hook's companion (cockpit.node.ranklinks) writes the
rank's sockets into logs/rank-R.HOST.links when asked, and cockpit.hang.ranklinks reads them back into the
TransportGather the node agent's records give on an ssh run. Real interpreters under the real hook, with real
TCP connections of their own; the pure merge on hand-made records."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import cockpit_env, wait_for

from cockpit.hang import gather
from cockpit.hang.linkfind import link_finding
from cockpit.hang.ranklinks import gather_ranks, read_rank_links
from cockpit.launch.slurm.launcher import SlurmLauncher
from cockpit.run.status import RunStatus
from cockpit.run.store import create_run_dir

STATUS = RunStatus(run_id="r", name="r", launcher="slurm", job_file="job.yaml", hosts=["h1"], world_size=1)
CONNECTED = """
    import socket, sys, time
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    client.sendall(b"x" * 100)
    peer.recv(100)
    def waits_here():
        print(server.getsockname()[1], flush=True)  # said from inside: a dump from now on shows this frame
        time.sleep(60)
    waits_here()
"""


def start(run_dir: Path, code: str, host: str = "h1", rank: str = "3", **extra_env: str) -> subprocess.Popen:
    """Python running ``code`` under the hook, as the rank wrapper starts it (cf. test_rankhook.start)."""
    env = cockpit_env(COCKPIT_RUN_DIR=str(run_dir), COCKPIT_HOST=host, RANK=rank,
                      PYTHONPATH=str(run_dir / "hook"), **extra_env)
    (run_dir / "logs" / f"rank-{rank}.{host}.log").touch()  # what the wrapper writes first
    return subprocess.Popen(["bash", "-c", 'export COCKPIT_WRAPPER_PID=$$; "$@" & wait $!', "wrap",
                             sys.executable, "-c", textwrap.dedent(code)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def child_pid(wrapper: subprocess.Popen) -> int:
    children = Path(f"/proc/{wrapper.pid}/task/{wrapper.pid}/children")
    return wait_for(lambda: int(children.read_text().split()[0]) if children.read_text().split() else None)


def stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def test_deadlink_slurm_rank_answers_links_request_with_its_own_sockets(tmp_path):
    run_dir = create_run_dir(tmp_path, "r")
    proc = start(run_dir, CONNECTED, SLURM_JOB_ID="77")
    try:
        port = int(proc.stdout.readline())
        found = SlurmLauncher().links(run_dir, STATUS)  # the slow-link watch's gather: logs/links.req
        assert found is not None and found.errors == () and found.silent == ()
        (node,) = found.nodes
        assert node.host == "h1" and node.answered and node.source in ("ss", "proc")
        (rank,) = node.ranks
        assert rank.rank == 3 and rank.pid == child_pid(proc)
        est = [s for s in rank.sockets if s.state == "ESTAB"]
        assert {s.peer.port for s in est} >= {port} and len(est) == 2  # both ends of its own connection
        assert link_finding(found.nodes, found.addr_to_node) is None  # healthy: nothing stuck, no finding
        record = json.loads((run_dir / "logs" / "rank-3.h1.links").read_text())
        assert record["lreq"] == (run_dir / "logs" / "links.req").read_text().strip() and record["req"] is None
        assert (run_dir / "logs" / "rank-3.h1.links").stat().st_mode & 0o777 == 0o600
    finally:
        stop(proc)


def test_deadlink_slurm_stacks_request_brings_links_with_the_stacks(tmp_path):
    run_dir = create_run_dir(tmp_path, "r")
    proc = start(run_dir, CONNECTED, SLURM_JOB_ID="77")
    try:
        port = int(proc.stdout.readline())
        pid = child_pid(proc)
        wait_for(lambda: (run_dir / "logs" / "rank-3.h1.beat").exists(), what="the first beat")
        got = gather.collect(run_dir, STATUS, timeout=15, rank_links=True,
                             signal_ranks=lambda _t: os.kill(pid, signal.SIGURG))
        assert "waits_here" in got[3].text
        link = got[3].link
        assert link is not None and link.silent == ()
        assert {s.peer.port for s in link.nodes[0].sockets if s.state == "ESTAB"} >= {port}
    finally:
        stop(proc)


def test_deadlink_slurm_links_request_and_stacks_request_together_both_answered(tmp_path):
    """The slow-link watch's links.req and a stall's dump.req in the same second (seen on the test Slurm): the
    rank's one .links record answers both, so neither gather finds it answering only the other."""
    run_dir = create_run_dir(tmp_path, "r")
    proc = start(run_dir, CONNECTED, SLURM_JOB_ID="77")
    try:
        proc.stdout.readline()
        pid = child_pid(proc)
        wait_for(lambda: (run_dir / "logs" / "rank-3.h1.beat").exists(), what="the first beat")
        (run_dir / "logs" / "links.req").write_text("123.5\n")
        got = gather.collect(run_dir, STATUS, timeout=15, rank_links=True,
                             signal_ranks=lambda _t: os.kill(pid, signal.SIGURG))
        link = got[3].link
        assert link is not None and [n.host for n in link.nodes] == ["h1"] and link.errors == ()
        record = json.loads((run_dir / "logs" / "rank-3.h1.links").read_text())
        assert record["lreq"] == "123.5" and record["req"] == (run_dir / "logs" / "dump.req").read_text().strip()
        assert read_rank_links(run_dir, {3: "h1"}, "123.5").nodes[0].answered
    finally:
        stop(proc)


def test_deadlink_outside_slurm_the_hook_writes_no_links(tmp_path):
    """Local and ssh runs read the sockets from outside: the hook neither reads its own nor looks for links.req."""
    run_dir = create_run_dir(tmp_path, "r")
    proc = start(run_dir, CONNECTED, SLURM_JOB_ID=None)
    try:
        proc.stdout.readline()
        pid = child_pid(proc)
        wait_for(lambda: (run_dir / "logs" / "rank-3.h1.beat").exists(), what="the first beat")
        got = gather.collect(run_dir, STATUS, timeout=15, rank_links=True,
                             signal_ranks=lambda _t: os.kill(pid, signal.SIGURG))
        assert "waits_here" in got[3].text  # it answered the request...
        assert not (run_dir / "logs" / "rank-3.h1.links").exists()  # ...without links
        assert got[3].link is not None and got[3].link.nodes == () and "h1: no rank" in got[3].link.errors[0]
    finally:
        stop(proc)


def _raw(host: str, rank: int, ss: str | None, t: float = 1.0) -> dict:
    fd = "5 -> socket:[111]\n" if rank == 0 else "6 -> socket:[222]\n"
    tcp = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
           f"   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 "
           f"{111 if rank == 0 else 222} 1 0000000000000000 20 4 30 10 -1\n")
    return {"host": host, "time": t, "addresses": ["10.0.0.1"],
            "ranks": [{"rank": rank, "pid": 100 + rank, "fd": fd, "tcp": tcp, "tcp6": None}],
            "ss": ss, "ifaces": {"eth0": {"operstate": "up\n", "carrier": "1\n", "carrier_down_count": "0\n",
                                          "addresses": ["10.0.0.1"]}}, "ib": {}}


def test_deadlink_rank_links_merge_a_nodes_ranks_and_leave_out_the_unanswered():
    records = {0: ("n1", {"req": "7", "raw": _raw("n1", 0, "")}),
               1: ("n1", {"req": "7", "raw": _raw("n1", 1, None, t=2.0)}),  # no ss: the /proc rows stand in
               2: ("n2", {"req": "6", "raw": _raw("n2", 2, None)}),  # an earlier request's: not this one's
               3: ("n3", None)}
    found = gather_ranks(records, "7", 'export GLOO_SOCKET_IFNAME=eth0\nsrun python train.py\n')
    # n2 and n3 gave nothing for this request: left out (a stopped rank is no cut-off node), and said
    assert [(n.host, n.answered) for n in found.nodes] == [("n1", True)]
    assert [e.split(":")[0] for e in found.errors] == ["n2", "n3"]
    n1 = found.nodes[0]
    assert n1.source == "proc" and [r.rank for r in n1.ranks] == [0, 1]
    assert [len(r.sockets) for r in n1.ranks] == [1, 1] and n1.addresses == ("10.0.0.1",)
    assert found.job_iface == {"n1": "eth0"} and found.silent == ()


def test_deadlink_rank_links_bad_records_are_said_not_raised(tmp_path):
    records = {0: ("n1", {"req": "7", "error": "PermissionError: /proc/self/fd"}),
               1: ("n2", {"req": "7", "raw": {"host": "n2", "ranks": "not a list"}}),
               2: ("n3", {"req": "7"})}
    found = gather_ranks(records, "7")
    assert found.nodes == () and found.silent == ()
    assert len(found.errors) == 6 and "PermissionError" in found.errors[0]
    assert "no raw record with a list of ranks" in found.errors[1]
    run_dir = create_run_dir(tmp_path, "r")
    (run_dir / "logs" / "rank-0.n1.links").write_text('{"req": "7", "raw": {')  # cut short
    found = read_rank_links(run_dir, {0: "n1"}, "7")
    assert found.nodes == () and "rank-0.n1.links: unreadable" in found.errors[0]
