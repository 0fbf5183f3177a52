"""`cockpit run` with the ssh launcher: real torchrun + gloo DDP of the demo across two namespaced hosts
(2 nodes x 2 ranks), node2 without the shared runs directory (its logs come back over SSH).

The runs use --grace 60: the supervisor's own last resort (killing local processes after --grace) must not
be what stops a run here, so every teardown measured below is the ssh launcher's."""

from __future__ import annotations

import asyncio
import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import REPO, wait_for

from cockpit.launch import supervision
from cockpit.launch.ssh.shell import list_script
from cockpit.remote import RemotePool
from cockpit.run.store import list_runs, read_status

pytestmark = pytest.mark.slow
SHORT = ["--", "--epochs", "1", "--steps-per-epoch", "30"]


def only_run(runs: Path):
    [(run_dir, status)] = list_runs(runs)
    return run_dir, status


def read(pattern: str) -> str:
    return "".join(Path(p).read_text(errors="replace") for p in glob.glob(pattern))


def left_on_nodes(lab, run_id: str) -> dict[str, list[int]]:
    """The run's live processes on each node: asked over SSH (as the launcher does), and from this
    machine's /proc over the node's PID namespace. The two must agree; they are looked at a moment apart, so
    while processes start or end they are asked again (a few times) before that counts as a disagreement."""
    async def ask():
        pool = RemotePool(lab.options())
        try:
            return [(await pool.get(h).run(["sh", "-c", list_script(run_id)], 30)).stdout.split()
                    for h in ("node1", "node2")]
        finally:
            await pool.close()
    for _ in range(5):
        over_ssh = asyncio.run(ask())
        here = {h: [p for p in lab.cluster.pids(h) if _in_run(p, run_id)] for h in ("node1", "node2")}
        if [len(x) for x in over_ssh] == [len(here["node1"]), len(here["node2"])]:
            return here
        time.sleep(0.5)
    assert [len(x) for x in over_ssh] == [len(here["node1"]), len(here["node2"])]
    return here


def _in_run(pid: int, run_id: str) -> bool:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return f"COCKPIT_RUN_ID={run_id}".encode() in env.split(b"\0") and state != b"Z"


def test_two_nodes_by_two_ranks_complete_with_every_log_here(lab):
    runs = lab.runs()
    r = lab.cockpit(runs, "run", str(lab.job("mn", ["node1", "node2"])), "--grace", "60", *SHORT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    run_dir, status = only_run(runs)
    assert status.state == "succeeded" and status.world_size == 4
    for rank in range(4):
        host = "node1" if rank < 2 else "node2"
        assert f"[{host}:{rank}] [cockpit] start rank={rank} world=4" in r.stdout
        assert f"finish rank={rank} step=30 exit_code=0" in (run_dir / f"logs/rank-{rank}.{host}.log").read_text()
        assert json.loads((run_dir / f"metrics/rank-{rank}.jsonl").read_text().splitlines()[-1])["step"] == 30
    assert sorted(status.ranks) == ["0", "1", "2", "3"] and all(x.status == 0 for x in status.ranks.values())
    assert f"== mn ({status.run_id}): succeeded in" in r.stdout
    node1, node2 = status.nodes
    assert node1.ssh.shared and node1.run_dir == str(run_dir)
    assert not node2.ssh.shared and node2.run_dir == f"{lab.runs_root}/node2-own/{status.run_id}"
    # node2's files were written there (a tmpfs only it sees) and copied here over SSH
    assert not Path(node2.run_dir).exists()
    script = (run_dir / "commands/node-1.sh").read_text()
    master = lab.cluster.nodes["node1"].address
    assert "--node-rank=1" in script and f"--master-addr={master}" in script and "--nnodes=2" in script
    assert "export GLOO_SOCKET_IFNAME=eth0" in script and f"export COCKPIT_RUN_DIR={node2.run_dir}" in script
    assert left_on_nodes(lab, status.run_id) == {"node1": [], "node2": []}


def test_a_failing_rank_on_node2_stops_both_nodes_and_is_named_first(lab):
    runs = lab.runs()
    r = lab.cockpit(runs, "run", str(lab.job("mn", ["node1", "node2"])), "-q", "--grace", "60", *SHORT,
                    "--fail-rank", "3", "--fail-step", "5")
    assert r.returncode != 0
    run_dir, status = only_run(runs)
    first = status.first_failure
    assert status.state == "failed" and (first.rank, first.host, first.status) == (3, "node2", 1)
    assert "first failure: rank 3 on node2: exit code 1" in r.stdout
    assert "RuntimeError: injected failure on rank 3 after step 5" in r.stdout  # node2's log, copied here
    took = status.ended - first.time
    print(f"rank failure -> run stopped on both nodes: {took:.1f} s")
    assert took <= 30
    assert left_on_nodes(lab, status.run_id) == {"node1": [], "node2": []}


def _torchrun(lab, node: str, run_id: str) -> int:
    for pid in lab.cluster.pids(node):
        try:
            words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"torch.distributed.run" in words and _in_run(pid, run_id):
            return pid
    return 0


def test_a_sigkilled_torchrun_does_not_leave_the_other_node_in_its_exit_barrier(lab):
    runs = lab.runs()
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(lab.job("mn", ["node1", "node2"])), "-q",
                             "--grace", "60", "--", "--epochs", "1", "--steps-per-epoch", "2000"],
                            cwd=REPO, env=lab.env(runs), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run_dir = wait_for(lambda: list_runs(runs) and list_runs(runs)[0][0], 60, "the run directory")
        wait_for(lambda: "step=10 " in read(f"{run_dir}/logs/rank-0.*.log"), 90, "training to start")
        pid = wait_for(lambda: _torchrun(lab, "node2", run_dir.name), 10, "node2's torchrun")
        killed = time.time()
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
    status = read_status(run_dir)
    first = status.first_failure
    assert status.state == "failed" and first.host == "node2" and first.agent and first.signal == 9
    assert "torchrun on node2 (node 1), before any rank failed: killed by SIGKILL" in out
    print(f"torchrun SIGKILL -> run stopped on both nodes: {status.ended - killed:.1f} s")
    assert status.ended - killed <= 30
    assert left_on_nodes(lab, status.run_id) == {"node1": [], "node2": []}


def test_training_outlives_a_killed_cockpit_and_attach_shows_the_end(lab):
    """c10d rendezvous here (node 0 hosts the store), static in the tests above."""
    runs = lab.runs()
    job = lab.job("mnc10d", ["node1", "node2"], rdzv="c10d")
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(job), "--", "--epochs", "1",
                             "--steps-per-epoch", "300"], cwd=REPO, env=lab.env(runs), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    run_dir = wait_for(lambda: list_runs(runs) and list_runs(runs)[0][0], 60, "the run directory")
    wait_for(lambda: "step=10 " in read(f"{run_dir}/logs/rank-0.*.log"), 90, "training to start")
    proc.kill()
    proc.communicate(timeout=10)
    assert read_status(run_dir).state == "running"
    script = (run_dir / "commands/node-1.sh").read_text()
    assert "--rdzv-backend=c10d" in script and "--rdzv-conf=is_host=0" in script
    assert f"--local-addr={lab.cluster.nodes['node2'].address}" in script  # its hostname resolves nowhere
    r = lab.cockpit(runs, "attach", run_dir.name, "-q", timeout=120)
    status = read_status(run_dir)
    assert r.returncode == 0 and status.state == "succeeded", r.stdout + r.stderr
    assert f"== mnc10d ({status.run_id}): succeeded in" in r.stdout
    node2 = read(f"{run_dir}/logs/rank-*.node2.log")  # followed over SSH after cockpit died
    assert node2.count("step=300 exit_code=0") == 2
    assert left_on_nodes(lab, status.run_id) == {"node1": [], "node2": []}


def test_cockpit_stop_stops_every_node(lab):
    runs = lab.runs()
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(lab.job("mn", ["node1", "node2"])), "-q",
                             "--", "--epochs", "1", "--steps-per-epoch", "2000"], cwd=REPO, env=lab.env(runs),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run_dir = wait_for(lambda: list_runs(runs) and list_runs(runs)[0][0], 60, "the run directory")
        wait_for(lambda: "step=10 " in read(f"{run_dir}/logs/rank-0.*.log"), 90, "training to start")
        asked = time.time()
        r = lab.cockpit(runs, "stop", run_dir.name, "--grace", "5", timeout=90)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    status = read_status(run_dir)
    assert r.returncode == 0 and status.state == "stopped", r.stderr
    assert "stopped in" in out
    print(f"cockpit stop -> run stopped on both nodes: {status.ended - asked:.1f} s")
    assert status.ended - asked <= 30
    # cockpit.train checkpoints on SIGTERM: every rank ended by itself, on both nodes
    assert sorted(status.ranks) == ["0", "1", "2", "3"]
    assert left_on_nodes(lab, status.run_id) == {"node1": [], "node2": []}


def supervisor_of(run_dir: Path) -> int:
    return wait_for(lambda: (read_status(run_dir).supervisor or {}).get("pid"), 60, "the supervisor's pid")


def test_cockpit_stop_without_a_supervisor_stops_every_node_over_ssh(lab):
    """The supervisor is SIGKILLed mid-run; `cockpit stop` must end the run on the nodes, not on this machine.
    It runs in a PID namespace of its own, so that, as on a real cluster, this machine's /proc does not show
    the nodes' processes (here they are this machine's too)."""
    runs = lab.runs()
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(lab.job("mnkill", ["node1", "node2"])),
                             "-q", "--grace", "60", "--", "--epochs", "1", "--steps-per-epoch", "2000"], cwd=REPO,
                            env=lab.env(runs), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run_dir = wait_for(lambda: list_runs(runs) and list_runs(runs)[0][0], 60, "the run directory")
        wait_for(lambda: "step=10 " in read(f"{run_dir}/logs/rank-0.*.log"), 90, "training to start")
        os.kill(supervisor_of(run_dir), signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate(timeout=10)
    run_id = read_status(run_dir).run_id
    assert [len(p) for p in left_on_nodes(lab, run_id).values()] != [0, 0]  # training goes on without it
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "cockpit", "stop",
                        run_dir.name, "--grace", "3"], capture_output=True, text=True, cwd=REPO, env=lab.env(runs),
                       timeout=120)
    status = read_status(run_dir)
    assert r.returncode == 0 and status.state == "stopped", r.stdout + r.stderr
    assert "on every node over SSH: node1: " in status.note and "node2: " in status.note, status.note
    assert left_on_nodes(lab, run_id) == {"node1": [], "node2": []}


def test_training_outlives_a_killed_supervisor_and_attach_recovers_the_end(lab):
    """SIGKILL the supervisor too: the SSH connections drop, nobody follows the nodes. Training goes on
    there; `cockpit attach` says so while it does, and once it is over copies node2's logs and records
    (node2 does not share the runs directory) and works out the end from them."""
    runs = lab.runs()
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(lab.job("mnsup", ["node1", "node2"])),
                             "-q", "--", "--epochs", "1", "--steps-per-epoch", "600"], cwd=REPO, env=lab.env(runs),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run_dir = wait_for(lambda: list_runs(runs) and list_runs(runs)[0][0], 60, "the run directory")
        wait_for(lambda: "step=10 " in read(f"{run_dir}/logs/rank-0.*.log"), 90, "training to start")
        os.kill(supervisor_of(run_dir), signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate(timeout=10)
    run_id = read_status(run_dir).run_id
    wait_for(lambda: not supervision.supervisor_alive(read_status(run_dir)), 30, "the supervisor to be reaped")
    r = lab.cockpit(runs, "attach", run_dir.name, "-q", timeout=60)
    assert r.returncode == 1 and "its supervisor is gone" in r.stderr and "node2: running" in r.stderr, r.stderr
    assert read_status(run_dir).state == "running" and left_on_nodes(lab, run_id)["node2"]
    wait_for(lambda: left_on_nodes(lab, run_id) == {"node1": [], "node2": []}, 120, "training to end on both nodes")
    r = lab.cockpit(runs, "attach", run_dir.name, "-q", timeout=60)
    status = read_status(run_dir)
    assert r.returncode == 0 and status.state == "succeeded", r.stdout + r.stderr + str(status)
    assert f"== mnsup ({run_id}): succeeded in" in r.stdout
    assert read(f"{run_dir}/logs/rank-*.node2.log").count("step=600 exit_code=0") == 2  # copied after the end
    assert sorted(status.ranks) == ["0", "1", "2", "3"]


def test_secrets_stay_private_on_both_sides_and_out_of_every_argument_list(lab):
    """The node script (with the job's API key) reaches node2 on stdin: no process on this machine — where the
    nodes' processes are too — ever has it, or its base64 transport, in its arguments. Every file of the run is
    0600 and every directory 0700, here and in node2's own run directory."""
    secret = f"s3cr3t-{os.getpid()}"
    runs = lab.runs()
    job = lab.job("mnsec", ["node1", "node2"], env={"GLOO_SOCKET_IFNAME": "eth0", "MY_API_KEY": secret})
    seen: list[str] = []
    done = threading.Event()

    def watch() -> None:  # every process's arguments, as often as this machine allows, for the whole run
        while not done.is_set():
            for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
                try:
                    words = Path(cmdline).read_bytes()
                except OSError:
                    continue
                if secret.encode() in words or b"base64 -d" in words:
                    seen.append(words.decode(errors="replace")[:200])
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        r = lab.cockpit(runs, "run", str(job), "-q", "--grace", "60", *SHORT)
    finally:
        done.set()
        watcher.join(30)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert seen == [], seen
    run_dir, status = only_run(runs)
    assert f"export MY_API_KEY={secret}" in (run_dir / "commands/node-1.sh").read_text()
    shown = lab.cockpit(runs, "render", str(job)).stdout
    assert "export MY_API_KEY='***'" in shown and secret not in shown

    async def modes(host: str, path: str) -> list[str]:
        pool = RemotePool(lab.options())
        try:
            return (await pool.get(host).run(["find", path, "-printf", "%y %m %p\\n"], 30)).stdout.splitlines()
        finally:
            await pool.close()
    node2_dir = status.nodes[1].run_dir
    for host, path in (("node1", str(run_dir)), ("node2", node2_dir)):
        found = asyncio.run(modes(host, path))
        assert len(found) > 10, found
        wrong = [line for line in found if line.split()[:2] not in (["d", "700"], ["f", "600"])]
        assert wrong == [], f"{host}: {wrong}"


def test_a_script_that_spawns_its_ranks_runs_once_per_node_with_a_log_per_rank(lab):
    """runner: spawn over ssh: node2 has its own run directory, so the hook's companion file must reach it and
    its spawned ranks' files come back over SSH like torchrun's."""
    runs = lab.runs()
    job = lab.job("mnspawn", ["node1", "node2"], runner="spawn", procs_per_node=2, args='["2", "2"]')
    job.write_text(job.read_text().replace("script: demo.py", "script: own/spawn_ddp.py"))
    r = lab.cockpit(runs, "run", str(job), "--grace", "60")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    run_dir, status = only_run(runs)
    assert status.state == "succeeded" and sorted(status.ranks) == ["0", "1", "2", "3"]
    for rank in range(4):
        host = "node1" if rank < 2 else "node2"
        assert f"[{host}:{rank}] spawned rank {rank} epoch 1" in r.stdout
        assert (run_dir / f"logs/rank-{rank}.{host}.exit").read_text().split()[0] == "0"
    assert "export NODE_RANK=1" in (run_dir / "commands/node-1.sh").read_text()
    assert left_on_nodes(lab, status.run_id) == {"node1": [], "node2": []}
