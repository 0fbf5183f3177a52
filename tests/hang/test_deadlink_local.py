"""deadlink (issue 31) on local runs: the supervisor's gather reads the ranks' TCP sockets the way the node
agent does on an ssh run's nodes (cockpit.node.linkread), so `cockpit stacks`, `stacks --json` and a hang
finding (status.json, `diagnose --json`) carry the connection table. Real torchrun + gloo on CPU, 2 ranks:
the table lists rank 0's connection to rank 1 and rank 1's to rank 0; a healthy run, and a rank stuck in its
own code, get no link finding."""

from __future__ import annotations

import json

import pytest
from hang.test_local_hangs import _read, cockpit, job, start, the_run
from helpers import wait_for

from cockpit.launch import procs
from cockpit.run.store import list_runs, read_status

pytestmark = pytest.mark.slow


def _pairs(rows: list[dict]) -> set[tuple[int, int]]:
    return {(r["rank"], r["peer_rank"]) for r in rows if r["peer_rank"] is not None}


def test_deadlink_local_run_stacks_show_the_ranks_connections_and_no_link_finding(tmp_path):
    path = job(tmp_path, "links", args=["--steps", "100000", "--step-ms", "20"])
    proc = start(tmp_path, "run", str(path), "-q", "--stall-after", "0")
    try:
        run_dir, _ = the_run(tmp_path)
        wait_for(lambda: "step 10" in _read(run_dir, 1), 90, "training")
        text = cockpit(tmp_path, "stacks", run_dir.name)
        assert text.returncode == 0, text.stderr
        links = text.stdout.split("== links ==\n", 1)[1].splitlines()
        host = read_status(run_dir).hosts[0]
        assert links[0].startswith(f"link {host}: ") and "connections: " in links[0], links
        assert links[1] == "no connection is stuck or slow: no link finding", links
        conns = [line for line in links if line.startswith("conn rank ")]
        assert any(line.startswith(f"conn rank 0 ({host}) ") and f"-> rank 1 ({host}) " in line for line in conns)
        assert any(line.startswith(f"conn rank 1 ({host}) ") and f"-> rank 0 ({host}) " in line for line in conns)
        js = cockpit(tmp_path, "stacks", run_dir.name, "--json")
        assert js.returncode == 0, js.stderr
        table = json.loads(js.stdout)["connections"]
        assert {(0, 1), (1, 0)} <= _pairs(table["rows"]) and table["rows_total"] == len(table["rows"])
        assert {r["kind"] for r in table["rows"]} <= {"busy", "idle"}, table  # healthy: nothing stuck or slow
        assert read_status(run_dir).findings == []
    finally:
        cockpit(tmp_path, "stop", "last", "--grace", "2")
        proc.communicate(timeout=60)
    assert procs.run_pids(read_status(run_dir).run_id) == []


def test_deadlink_local_stall_in_own_code_carries_the_connections_and_no_link(tmp_path):
    """Rank 1 blocks in its own code, rank 0 waits in all_reduce: the stall finding has the connection table
    (status.json, diagnose --json `connections`) and no link finding (no `link`, no `links`)."""
    path = job(tmp_path, "ownhang", args=["--stuck-rank", "1", "--stuck-step", "3"], extra="on_stall: stop\n")
    r = cockpit(tmp_path, "run", str(path), "--stall-after", "5", "--grace", "3")
    _run_dir, status = list_runs(tmp_path)[0]
    assert r.returncode != 0 and status.state == "stopped", r.stdout + r.stderr
    [f] = [x.to_dict() for x in status.findings]
    assert f["kind"] == "stall" and "link" not in f
    assert {(0, 1), (1, 0)} <= _pairs(f["connections"]["rows"]), f["connections"]
    d = cockpit(tmp_path, "diagnose", status.run_id, "--json")
    out = json.loads(d.stdout)
    [conns] = out["connections"]
    assert conns["run"] == status.run_id and conns["kind"] == "stall" and "links" not in out
    assert {(0, 1), (1, 0)} <= _pairs(conns["rows"])
