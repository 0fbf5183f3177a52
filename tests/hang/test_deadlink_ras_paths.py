"""deadlink (issue 31): NCCL's RAS asked on each path a stacks request takes, against the RAS replay server
(tests/hang/rasreplay.py: the recorded H100 report, NCCL 2.28.9) bound where the job's NCCL_RAS_ADDR says:
the ssh node agent (the program as shipped), a Slurm rank's hook (a real interpreter under the real hook), and
a real local run (`cockpit run` with on_stall: stop, `cockpit stacks`, `diagnose --json`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hang.rasreplay import RasReplay
from hang.test_deadlink_rank_links import CONNECTED, STATUS, child_pid, start, stop
from hang.test_local_hangs import cockpit
from helpers import REPO, wait_for

from cockpit.hang import gather
from cockpit.hang.transport_raw import node_transport
from cockpit.launch.ssh.shell import agent_source
from cockpit.run.store import create_run_dir, list_runs

RAS = REPO / "tests" / "fixtures" / "deadlink" / "ras"
H100 = ((RAS / "h100-2.28.9-1rank-healthy.txt").read_text(), (RAS / "h100-2.28.9-1rank-healthy.json").read_text())


def test_deadlink_ras_agent_stacks_asks_ras_at_the_address_given(tmp_path):
    rank = subprocess.Popen([sys.executable, "-c", "import sys; print('up', flush=True); sys.stdin.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert rank.stdout.readline().strip() == "up"
        logs = tmp_path / "logs"
        logs.mkdir()
        (logs / "rank-0.hostA.pid").write_text(f"{rank.pid}\n")
        (logs / "rank-0.hostA.stacks").write_text("")
        with RasReplay(*H100) as server:
            args = {"run_dir": str(tmp_path), "host": "hostA", "request": "1.0", "marker": "#\n", "timeout": 0.3,
                    "transport": True, "ras": server.addr}
            out = subprocess.run([sys.executable, "-c", agent_source(), "stacks", json.dumps(args)],
                                 capture_output=True, text=True, timeout=60)
        lines = [json.loads(line) for line in out.stdout.splitlines()]
        [raw] = [a["transport"] for a in lines if "transport" in a]
        node = node_transport(raw, "hostA")
        assert node.ras is not None and node.ras.report is not None
        assert (node.ras.addr, node.ras.fmt, node.ras.report.version, node.ras.report.ok) == (
            server.addr, "json", "2.28.9", True)
        from cockpit.launch.ssh.stacks import rank_answers

        assert [a["rank"] for a in rank_answers(lines)] == [0]  # the stacks answer, in the node's one message
    finally:
        rank.stdin.close()
        rank.wait(10)


def test_deadlink_ras_slurm_rank_asks_ras_with_its_stacks_answer(tmp_path):
    run_dir = create_run_dir(tmp_path, "r")
    with RasReplay(*H100) as server:
        proc = start(run_dir, CONNECTED, SLURM_JOB_ID="77", COCKPIT_PG_BACKEND="nccl", NCCL_RAS_ADDR=server.addr)
        try:
            proc.stdout.readline()
            pid = child_pid(proc)
            wait_for(lambda: (run_dir / "logs" / "rank-3.h1.beat").exists(), what="the first beat")
            got = gather.collect(run_dir, STATUS, timeout=15, rank_links=True,
                                 signal_ranks=lambda _t: os.kill(pid, signal.SIGURG))
        finally:
            stop(proc)
    link = got[3].link
    assert link is not None and link.errors == ()
    ras = link.nodes[0].ras
    assert ras is not None and ras.report is not None and (ras.state, ras.report.version) == ("answered", "2.28.9")
    assert "VERBOSE STATUS" in server.commands


SLEEPER = """import time
for i in range(1, 6):
    print(f"step {i}", flush=True)
    time.sleep(0.2)
while True:
    time.sleep(1)  # stuck: no output from here on
"""


@pytest.mark.slow
def test_deadlink_ras_local_nccl_run_stall_carries_the_ras_report(tmp_path):
    """A local run whose job is on nccl (pg_backend: nccl; the script itself needs no GPU) goes quiet; the stall's
    stacks are gathered with the RAS report at the job's NCCL_RAS_ADDR, and on_stall: stop ends it. The stacks
    file, status.json's finding and `diagnose --json` carry it."""
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    with RasReplay(*H100) as server:
        job = tmp_path / "ras.yaml"
        job.write_text(f"name: ras\nscript: {script}\nlauncher: local\ngpus: [0]\npg_backend: nccl\n"
                       f"on_stall: stop\nstart_after: 4\nenv:\n  NCCL_RAS_ADDR: \"{server.addr}\"\n")
        r = cockpit(tmp_path, "run", str(job), "--no-preflight", "--grace", "3")
    run_dir, status = list_runs(tmp_path)[0]
    assert r.returncode != 0 and status.state == "stopped", r.stdout + r.stderr
    [f] = [x.to_dict() for x in status.findings]
    [entry] = f["connections"]["ras"]
    assert (entry["addr"], entry["version"], entry["ok"], entry["format"]) == (server.addr, "2.28.9", True, "json")
    host = status.hosts[0]
    assert f"ras {host}: NCCL 2.28.9 (json, " in Path(f["stacks"]).read_text()
    d = cockpit(tmp_path, "diagnose", status.run_id, "--json")
    [ras] = json.loads(d.stdout)["ras"]
    assert (ras["run"], ras["node"], ras["version"], ras["state"]) == (status.run_id, host, "2.28.9", "answered")
    assert Path(run_dir).is_dir()
