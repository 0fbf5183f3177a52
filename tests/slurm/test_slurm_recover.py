"""recover: on the test Slurm cluster (tests/slurm/cluster.py, nodes n1 and n2): a rank that fails with a cause the
diagnosis blames on its node (a recorded NVRM Xid line) is relaunched with sbatch --exclude=<that node> and runs on
the other node; a cause that is not a node's is relaunched without --exclude; a node to blame with no other node
for the job stops the run and names the node; attempts used up give up. Real sbatch, srun, squeue."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import REPO, wait_for

from cockpit.run.store import read_status

pytestmark = pytest.mark.slow
# A line the kernel wrote (see tests/fixtures/nccl2/dev/CITATIONS.b.md): the diagnosis reads it as gpu_xid,
# a hardware cause, blamed on the node whose rank printed it.
XID_LOG = REPO / "tests/fixtures/nccl2/dev/b_dmesg_T_grep_nvrm_xid_43_31_94_pt_main_thread.log"
# Fails while COCKPIT_ATTEMPT < FAIL_ATTEMPTS: MODE xid prints the recorded Xid line and exits 1, MODE raise raises
# (at a line that differs per attempt, so that "the same exception twice" does not end the run).
SCRIPT = """\
import json, os, sys, time
attempt = int(os.environ["COCKPIT_ATTEMPT"])
node, rank = os.environ["COCKPIT_HOST"], os.environ["RANK"]
print(f"[node_fault] attempt={attempt} node={node} rank={rank}", flush=True)
mode, fail_attempts, xid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if rank == "0":  # steps 1-3 in cockpit.train's metrics form (time, step): the goodput is counted from them
    os.makedirs(os.path.join(os.environ["COCKPIT_RUN_DIR"], "metrics"), exist_ok=True)
    with open(os.path.join(os.environ["COCKPIT_RUN_DIR"], "metrics", "rank-0.jsonl"), "a") as f:
        for step in (1, 2, 3):
            f.write(json.dumps({"time": time.time(), "step": step}) + "\\n")
if attempt < fail_attempts and rank == "0":
    if mode == "xid":
        print(next(line for line in open(xid) if "NVRM: Xid" in line).rstrip("\\n"), flush=True)
        sys.exit(1)
    exec("\\n" * attempt + "raise RuntimeError('boom')")
print(f"[node_fault] done on {node}", flush=True)
"""


def write_job(tmp_path: Path, name: str, mode: str, fail_attempts: int, attempts: int, nodes: int = 1) -> Path:
    script = tmp_path / "node_fault.py"
    script.write_text(SCRIPT)
    job = {"name": name, "script": str(script), "args": [mode, str(fail_attempts), str(XID_LOG)],
           "launcher": "slurm", "nodes": nodes, "procs_per_node": 1, "gpus": "none", "python": sys.executable,
           "recover": {"attempts": attempts, "on": ["failure"]}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def run(cluster, tmp_path: Path, job: Path) -> tuple[subprocess.CompletedProcess, Path]:
    runs = tmp_path / "runs"
    env = {**cluster.env, "COCKPIT_RUNS_DIR": str(runs), "NO_COLOR": "1"}
    r = subprocess.run([sys.executable, "-m", "cockpit", "run", str(job), "-q"], capture_output=True, text=True,
                       cwd=REPO, env=env, timeout=300)
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    return r, run_dir


def said(run_dir: Path) -> list[tuple[int, str, str]]:
    """(attempt, node, rank) of every start the script printed, from every rank log."""
    out = []
    for log in sorted((run_dir / "logs").glob("rank-*.log")):
        for line in log.read_text().splitlines():
            if line.startswith("[node_fault] attempt="):
                words = dict(w.split("=", 1) for w in line.split()[1:])
                out.append((int(words["attempt"]), words["node"], words["rank"]))
    return sorted(out)


def explain(r: subprocess.CompletedProcess, run_dir: Path) -> str:
    logs = "".join(f"\n== {p.name}\n{p.read_text()}" for p in sorted((run_dir / "logs").glob("*.log")))
    return r.stdout + r.stderr + (run_dir / "status.json").read_text() + logs


def test_a_node_blamed_for_an_xid_is_left_out_of_the_next_attempt(slurm_cluster, tmp_path):
    r, run_dir = run(slurm_cluster, tmp_path, write_job(tmp_path, "rec-xid", "xid", 1, 2))
    assert r.returncode == 0, explain(r, run_dir)
    status = read_status(run_dir)
    starts = said(run_dir)
    assert [a for a, _n, _r in starts] == [0, 1], explain(r, run_dir)
    bad, good = starts[0][1], starts[1][1]
    assert {bad, good} == {"n1", "n2"}, starts  # the second attempt ran on the other node
    (node,) = status.nodes
    assert node.slurm.excluded == (bad,) and len(node.slurm.earlier_jobs) == 1, node
    first, second = node.slurm.earlier_jobs[0], node.slurm.job_id
    a0, a1 = status.attempts
    assert a0.end == "failure" and a0.culprit_host == bad and a0.culprit_rank == 0 and "Xid" in a0.cause
    assert f"without node {bad}" in a0.decision and f"--exclude={bad}" in a0.decision, a0.decision
    # the command as the note shows it is sbatch's argv, quoted, and it is what ran
    cmd = a0.decision.split(": ", 2)[-1].rstrip(")")
    assert shlex.split(cmd)[:3] == ["sbatch", "--parsable", f"--exclude={bad}"], cmd
    assert a1.end == "succeeded" and status.state == "succeeded"
    assert (a0.step, a1.step) == (3, 3) and status.goodput is not None and 0 <= status.goodput < 1, status
    batch = (run_dir / "logs" / "agent.sbatch.log").read_text()
    assert f"job={first} nodes={bad}" in batch and f"job={second} nodes={good}" in batch
    assert "[cockpit] attempt 1 (COCKPIT_ATTEMPT=1) of 3 starts" in (run_dir / "logs" / f"rank-0.{bad}.log").read_text()
    assert f"[node_fault] done on {good}" in (run_dir / "logs" / f"rank-0.{good}.log").read_text()
    assert (run_dir / "logs" / "attempt-0" / f"rank-0.{bad}.exit").is_file()
    ps = subprocess.run([sys.executable, "-m", "cockpit", "ps", "--json"], capture_output=True, text=True,
                        cwd=REPO, env={**slurm_cluster.env, "COCKPIT_RUNS_DIR": str(run_dir.parent)}, timeout=60)
    assert ps.returncode == 0, ps.stderr
    [row] = json.loads(ps.stdout)["runs"]
    assert [a["end"] for a in row["attempts"]] == ["failure", "succeeded"], row


def test_a_cause_not_blamed_on_a_node_relaunches_without_exclude(slurm_cluster, tmp_path):
    r, run_dir = run(slurm_cluster, tmp_path, write_job(tmp_path, "rec-raise", "raise", 1, 1))
    assert r.returncode == 0, explain(r, run_dir)
    status = read_status(run_dir)
    assert [a for a, _n, _r in said(run_dir)] == [0, 1]
    (node,) = status.nodes
    assert node.slurm.excluded is None and len(node.slurm.earlier_jobs) == 1, node
    a0 = status.attempts[0]
    assert "RuntimeError" in a0.cause and "without node" not in a0.decision and "--exclude" not in a0.decision
    assert "sbatch --parsable /" in a0.decision, a0.decision
    assert status.state == "succeeded"


def test_a_blamed_node_with_no_other_for_the_job_stops_and_is_named(slurm_cluster, tmp_path):
    # two nodes asked for, the cluster has two: without the blamed one the job cannot run
    r, run_dir = run(slurm_cluster, tmp_path, write_job(tmp_path, "rec-nonode", "xid", 3, 2, nodes=2))
    status = read_status(run_dir)
    # the job's code as Slurm gives it: 1, or 143 where srun's SIGTERM reached rank 1 before it had ended (CI saw both)
    assert r.returncode != 0 and r.returncode == status.exit_code, explain(r, run_dir)
    bad = status.attempts[0].culprit_host
    assert bad in ("n1", "n2") and len(status.attempts) == 1
    assert status.note.startswith(f"not retried: node {bad} is to blame and Slurm has no other node"), status.note
    assert f"fix node {bad}" in status.note and status.state == "failed"
    assert status.nodes[0].slurm.earlier_jobs is None  # nothing was submitted again


def test_attempts_used_up_give_up(slurm_cluster, tmp_path):
    r, run_dir = run(slurm_cluster, tmp_path, write_job(tmp_path, "rec-giveup", "xid", 5, 1))
    assert r.returncode == 1, explain(r, run_dir)
    status = read_status(run_dir)
    starts = said(run_dir)
    assert [a for a, _n, _r in starts] == [0, 1] and starts[0][1] != starts[1][1], starts
    assert status.note.startswith("gave up after 2 attempts: rank 0 had a GPU fault (Xid)"), status.note
    assert status.state == "failed" and [a.end for a in status.attempts] == ["failure", "failure"]


def test_a_stall_is_relaunched_without_exclude_and_not_taken_for_a_stop(slurm_cluster, tmp_path):
    # 2 nodes x 1 task of the demo; rank 1 (on the second node) hangs in the first attempt only: the watchdog
    # finds the stall, cockpit cancels the job itself (not a stop someone asked for) and submits it again; a stall
    # blames no node. One task per node and no in-allocation preflight: each rank and each preflight task is a
    # torch import, seconds on a loaded machine, twice (two attempts); 2 tasks per node is test_slurm_hang's.
    from slurm.test_slurm_runs import NO_PREFLIGHT, SMALL
    from slurm.test_slurm_runs import write_job as demo_job

    args = [*SMALL, "--fail-rank", "1", "--fail-step", "5", "--fail-mode", "hang", "--fail-attempts", "1"]
    job = demo_job(tmp_path, "rec-stall", args=args, procs_per_node=1, slurm=NO_PREFLIGHT)
    job.write_text(job.read_text() + "stall_after: 8\nrecover:\n  attempts: 1\n  on: [stall]\n")
    r, run_dir = run(slurm_cluster, tmp_path, job)
    assert r.returncode == 0, explain(r, run_dir)
    status = read_status(run_dir)
    a0, a1 = status.attempts
    assert a0.end == "stall" and a0.culprit_rank == 1 and a1.end == "succeeded" and status.state == "succeeded"
    assert "--exclude" not in a0.decision and "sbatch --parsable /" in a0.decision, a0.decision
    (node,) = status.nodes
    assert node.slurm.excluded is None and len(node.slurm.earlier_jobs) == 1 and not status.stop_requested


# Attempt 0 waits until its node is taken away; attempt 1 ends at once.
DOWN_SCRIPT = """\
import os, time
attempt = int(os.environ["COCKPIT_ATTEMPT"])
print(f"[down] attempt={attempt} node={os.environ['COCKPIT_HOST']}", flush=True)
for _ in range(600 if attempt == 0 else 0):
    time.sleep(0.1)
print("[down] done", flush=True)
"""


def test_a_node_that_fails_under_the_job_is_left_out_with_exclude(slurm_cluster, tmp_path):
    """About 15 s. The node's slurmd stops and the node is set DOWN while attempt 0 runs there (a node that stopped
    answering); --no-requeue, so that Slurm ends the job (NODE_FAIL) instead of requeueing it by itself. recover:
    blames the node srun reported failed and submits attempt 1 with --exclude; the node is back after."""
    script = tmp_path / "down.py"
    script.write_text(DOWN_SCRIPT)
    job = {"name": "rec-down", "script": str(script), "launcher": "slurm", "nodes": 1, "procs_per_node": 1,
           "gpus": "none", "python": sys.executable, "recover": {"attempts": 1, "on": ["failure"]},
           "slurm": {"extra": ["--no-requeue"]}}
    path = tmp_path / "rec-down.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(path), "-q"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**slurm_cluster.env, "COCKPIT_RUNS_DIR": str(runs), "NO_COLOR": "1"})
    bad = None
    try:
        def started() -> str | None:
            return next((line.split("node=")[1] for log in runs.glob("*/logs/rank-0.*.log")
                         for line in log.read_text().splitlines() if line.startswith("[down] attempt=0")), None)

        bad = wait_for(started, 120, "attempt 0 to start")
        slurmd = slurm_cluster.pids.pop(f"slurmd.{bad}")
        os.kill(slurmd, signal.SIGTERM)
        wait_for(lambda: not Path(f"/proc/{slurmd}").exists(), 20, f"slurmd of {bad} to stop")
        slurm_cluster.run("scontrol", "update", f"nodename={bad}", "state=down", "reason=cockpit-test")
        out, err = proc.communicate(timeout=200)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if bad is not None:
            slurm_cluster.restart_slurmd(bad)
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    r = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert r.returncode == 0, explain(r, run_dir)
    status = read_status(run_dir)
    a0, a1 = status.attempts
    assert a0.end == "failure" and a0.cause.startswith(f"Slurm lost node {bad} (srun: Node failure on {bad})"), a0
    assert f"without node {bad}" in a0.decision and f"--exclude={bad}" in a0.decision, a0.decision
    (node,) = status.nodes
    assert node.slurm.excluded == (bad,) and len(node.slurm.earlier_jobs) == 1, node
    good = next(n for n in ("n1", "n2") if n != bad)
    assert a1.end == "succeeded" and "[down] done" in (run_dir / "logs" / f"rank-0.{good}.log").read_text()
