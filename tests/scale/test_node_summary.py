"""Per-node aggregation (issue 32): an ssh run's node agent answers a stacks request with ONE message for its
node, its ranks' answers in it, so the client handles a message per node, not per rank. The agent runs here as
the ssh launcher runs it on a node (its `stacks` command), against real stand-in ranks of a simulated host."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from cockpit.hang.evidence import new_request
from cockpit.hang.stacks import marker
from cockpit.launch.ssh.stacks import rank_answers
from scale import harness


@pytest.fixture
def sim(tmp_path):
    made = harness.launch_local(8, 2, home=tmp_path)
    made.wait_stepping(120)  # asked before the first step, a rank's stack is in init_process_group
    yield made
    made.close()


def test_a_node_agent_sends_one_message_with_every_rank_of_its_node(sim):
    request = new_request()
    args = {"run_dir": str(sim.run_dir), "host": "n1", "request": request, "marker": marker(request, time.time()),
            "ranks": [], "timeout": 20}
    out = subprocess.run([sys.executable, "-m", "cockpit.node.agent", "stacks", json.dumps(args)], cwd=harness.REPO,
                         env=sim.env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(lines) == 1 and lines[0]["host"] == "n1"  # one message for the node
    answers = rank_answers(lines)
    assert [a["rank"] for a in answers] == [4, 5, 6, 7]  # n1's ranks, n0's not asked
    assert all("all_reduce" in a["text"] and a["beat"]["req"] == request for a in answers)


def test_the_client_reads_a_node_summary_and_one_rank_lines_alike():
    summary = [{"transport": {}}, {"host": "n0", "ranks": [{"rank": 0, "text": "a"}, {"rank": 1, "text": "b"}]}]
    assert [a["rank"] for a in rank_answers(summary)] == [0, 1]
    assert [a["rank"] for a in rank_answers([{"rank": 3, "text": "c"}, {"transport_error": "x"}])] == [3]
