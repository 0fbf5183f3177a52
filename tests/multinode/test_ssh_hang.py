"""A hang across two namespaced ssh nodes: rank 3 (on node2, whose logs come back over SSH) hangs in the
demo's own code; the watchdog asks every node's ranks for their stacks through the node agent, names rank 3
on node2 at demo.py's line, and with on_stall: stop tears both nodes down."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers import REPO
from multinode.test_ssh_runs import left_on_nodes

from cockpit.run.store import list_runs

pytestmark = pytest.mark.slow
HANG_LINE = next(i for i, line in enumerate((REPO / "jobs" / "demo.py").read_text().splitlines(), 1)
                 if "time.sleep(3600)" in line)


def test_a_hang_on_node2_is_named_with_host_and_line_and_stopped_on_both_nodes(lab):
    runs = lab.runs()
    job = lab.job("mnhang", ["node1", "node2"], on_stall="stop")
    began = time.monotonic()
    r = lab.cockpit(runs, "run", str(job), "-q", "--grace", "60", "--stall-after", "8", "--", "--epochs", "1",
                    "--steps-per-epoch", "200", "--fail-rank", "3", "--fail-step", "5", "--fail-mode", "hang")
    took = time.monotonic() - began
    [(run_dir, status)] = list_runs(runs)
    assert r.returncode != 0 and status.state == "stopped", r.stdout[-3000:] + r.stderr[-3000:]
    [f] = [x.to_dict() for x in status.findings]  # as status.json has it
    assert f["kind"] == "stall"
    where = f"maybe_fail (demo.py:{HANG_LINE})"
    assert [(c["rank"], c["host"], c["where"]) for c in f["culprits"]] == [(3, "node2", where)]
    assert sorted(v["rank"] for v in f["victims"]) == [0, 1, 2]
    assert {v["host"] for v in f["victims"]} == {"node1", "node2"}
    assert "rank 3 (node2) is stuck in maybe_fail" in r.stderr and "STALL" in r.stderr
    assert "link" not in f and "likely fault" not in f["text"]  # its own code, not a link: no link finding (issue 31)
    stacks = Path(f["stacks"]).read_text()
    assert "== node1 ==" in stacks and "== node2 ==" in stacks
    assert "no connection is stuck or slow: no link finding" in stacks
    print(f"ssh hang: stall_after 8 s -> finding and stop on both nodes; run took {took:.1f} s")
    assert left_on_nodes(lab, status.run_id) == {"node1": [], "node2": []}
