"""A hang on the real test Slurm (2 nodes x 2 tasks of the demo, gloo on CPU): rank 3 hangs in the demo's
own code; the watchdog signals every task of the job with `scancel --signal=URG` for their stacks, names the
culprit with its node and line, and with on_stall: stop cancels the job."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers import REPO
from slurm.test_slurm_runs import NO_PREFLIGHT, SMALL, cockpit, write_job
from slurm.test_slurm_runs import runs as runs  # noqa: F401 - the fixture, shared

from cockpit.launch import procs
from cockpit.run.store import list_runs

pytestmark = pytest.mark.slow
HANG_LINE = next(i for i, line in enumerate((REPO / "jobs" / "demo.py").read_text().splitlines(), 1)
                 if "time.sleep(3600)" in line)


def test_a_hang_under_slurm_is_named_with_node_and_line_and_the_job_cancelled(slurm_cluster, runs, tmp_path):
    args = [*SMALL[:2], "--steps-per-epoch", "200", *SMALL[4:], "--fail-rank", "3", "--fail-step", "5",
            "--fail-mode", "hang"]
    job = write_job(tmp_path, "shang", args=args, slurm=NO_PREFLIGHT)
    job.write_text(job.read_text() + "on_stall: stop\nstall_after: 8\n")
    began = time.monotonic()
    r = cockpit(slurm_cluster, runs, "run", str(job), "-q", "--grace", "5")
    took = time.monotonic() - began
    [(run_dir, status)] = list_runs(runs)
    assert r.returncode != 0 and status.state == "stopped", r.stdout[-3000:] + r.stderr[-3000:]
    [f] = [x.to_dict() for x in status.findings]  # as status.json has it
    [culprit] = f["culprits"]
    assert (culprit["rank"], culprit["where"]) == (3, f"maybe_fail (demo.py:{HANG_LINE})")
    victims = {v["rank"]: v["host"] for v in f["victims"]}
    assert sorted(victims) == [0, 1, 2] and victims[2] == culprit["host"] != victims[0]  # 2 tasks per node
    assert f"rank 3 ({culprit['host']}) is stuck in maybe_fail (demo.py:{HANG_LINE})" in r.stderr
    assert "== " + culprit["host"] + " ==" in Path(f["stacks"]).read_text()
    # each rank's own sockets came back with its stacks (logs/rank-R.HOST.links); a hang in the rank's own code
    # leaves nothing queued: the table is there, no link is blamed
    conns = f["connections"]
    assert conns["silent"] == [] and {row["rank"] for row in conns["rows"]} == {0, 1, 2, 3}, conns
    assert all(row["kind"] not in ("stuck", "slow") for row in conns["rows"]) and "link" not in f, conns
    assert {h for h in victims.values()} | {culprit["host"]} == {p.name.split(".")[1]
                                                                 for p in (run_dir / "logs").glob("rank-*.links")}
    print(f"slurm hang: stall_after 8 s -> finding and scancel; run took {took:.1f} s")
    assert procs.run_pids(status.run_id) == []
