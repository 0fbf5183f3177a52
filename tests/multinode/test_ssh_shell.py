"""The ssh launcher's node-side pieces on this machine, with real processes: the detached start, the stop by
run id, the node agent's watch (resume from offsets, the end record), and the plan's JSON form."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
import types

from helpers import cockpit_env, require_tool, wait_for

from cockpit import contract
from cockpit.launch import procs
from cockpit.launch.ssh.plan import NodePlan, SSHPlan, Timing
from cockpit.launch.ssh.shell import agent_command, list_script, parse_started, start_script, stop_script
from cockpit.remote import LocalRemote, SSHOptions


def sh(script: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=timeout)


def test_generated_shell_passes_shellcheck(tmp_path):
    shellcheck = require_tool("shellcheck")
    for name, text in [("start.sh", start_script("/r/x y", "n1", 0, "echo hi\n")), ("stop.sh", stop_script("r-1", 3)),
                       ("list.sh", list_script("r-1"))]:
        (tmp_path / name).write_text("#!/bin/sh\n" + text + "\n")
    r = subprocess.run([shellcheck, "--severity=warning", *map(str, sorted(tmp_path.iterdir()))],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def test_start_writes_the_script_runs_it_detached_and_records_its_end(tmp_path):
    run_dir = tmp_path / "run dir"  # a space: everything is quoted
    script = "echo started $COCKPIT_ATTEMPT; sleep 0.3; echo done; exit 3\n"
    r = sh(start_script(str(run_dir), "node/1", 2, script, attempt=4))  # recover:'s attempt crosses SSH here
    assert r.returncode == 0, r.stderr
    pid, ticks = parse_started(r.stdout)
    assert ticks == procs.start_time(pid)
    assert (run_dir / "commands/node-2.sh").read_text() == script
    exit_file = run_dir / "logs/agent.node_1.exit"
    status, when = wait_for(lambda: exit_file.exists() and exit_file.read_text().split()).copy()
    assert status == "3" and abs(float(when) - time.time()) < 10
    assert (run_dir / "logs/agent.node_1.log").read_text() == "started 4\ndone\n"


def test_stop_finds_the_runs_processes_by_environment_and_escalates(tmp_path):
    run_id = f"t-{secrets.token_hex(4)}"
    env = f"COCKPIT_RUN_ID={run_id}"
    polite = subprocess.Popen(["sh", "-c", f"exec env {env} sleep 60"], start_new_session=True)
    stubborn = subprocess.Popen(["sh", "-c", f"exec env {env} sh -c \"trap '' TERM; sleep 60 & wait\""],
                                start_new_session=True)
    wait_for(lambda: len(procs.run_pids(run_id)) == 3)  # sleep, sh, its sleep
    listed = sh(list_script(run_id)).stdout.split()
    assert sorted(map(int, listed)) == sorted(procs.run_pids(run_id))
    t0 = time.monotonic()
    r = sh(stop_script(run_id, 1.0))
    took = time.monotonic() - t0
    found, killed, left = map(int, r.stdout.split())
    assert (found, left) == (3, 0) and killed >= 1 and took < 5
    polite.wait(5)
    stubborn.wait(5)
    assert procs.run_pids(run_id) == []
    assert sh(stop_script(run_id, 1.0)).stdout.split() == ["0", "0", "0"]


def run_agent(command: str, args: dict, stdin: str = "") -> list[dict]:
    line = agent_command(sys.executable, command, args)
    r = subprocess.run(["sh", "-c", line], input=stdin, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


def test_agent_watch_copies_from_offsets_and_reports_the_end(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "metrics").mkdir()
    (tmp_path / "logs/rank-0.n.log").write_bytes(b"hello \xff world\n" * 3000)  # > one chunk, not UTF-8
    (tmp_path / "metrics/rank-0.jsonl").write_text('{"step": 1}\n')
    (tmp_path / "logs/agent.n.exit").write_text("0 1700000000.5\n")
    args = {"run_dir": str(tmp_path), "exit_file": str(tmp_path / "logs/agent.n.exit"), "pid": 999999999,
            "start": None, "copy": True, "offsets": {"logs/rank-0.n.log": 15}}
    msgs = run_agent("watch", args)
    assert msgs[0] == {"hello": True, "alive": False} and msgs[-1] == {"exit": 0, "time": 1700000000.5}
    chunks = [m for m in msgs if m.get("path") == "logs/rank-0.n.log"]
    assert chunks[0]["offset"] == 15 and len(chunks) > 1
    data = b"".join(base64.b64decode(m["data"]) for m in chunks)
    assert data == (b"hello \xff world\n" * 3000)[15:]
    assert any(m.get("path") == "logs/agent.n.exit" for m in msgs)
    # without the exit record and with the process gone: "gone"
    (tmp_path / "logs/agent.n.exit").unlink()
    assert run_agent("watch", {**args, "copy": False})[-1]["gone"] is True


def test_agent_check_and_listen_on_this_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # what the agent's runs_dir follows
    marker = tmp_path / "marker"
    marker.write_text("tok\n")

    async def go():
        remote = LocalRemote()
        stream = await remote.stream(agent_command(sys.executable, "listen", {"port": 0}))
        port = json.loads(await stream.__anext__())["port"]
        args = {"workdir": str(tmp_path), "script": "nope.py", "marker": str(marker), "token": "tok",
                "master": "127.0.0.1", "port": port}
        answer = await remote.run(agent_command(sys.executable, "check", args), 30)
        taken = await remote.run(agent_command(sys.executable, "listen", {"port": port}), 30)
        await stream.close()
        return json.loads(answer.stdout), json.loads(taken.stdout)
    answer, taken = asyncio.run(go())
    assert answer["reached"] and answer["shared"] and answer["workdir"] and answer["script"] is False
    assert answer["runs_dir"] == str(tmp_path / "state" / "cockpit" / "runs")
    lo = next(i for i in answer["interfaces"] if i["name"] == "lo")  # for nodes without cockpit's probe
    assert lo["loopback"] and lo["up"] and "127.0.0.1/8" in lo["ipv4"]
    assert taken["free"] is False and taken["error"]


def test_plan_round_trips_through_json():
    plan = SSHPlan("r-1", "/opt/py", "10.0.0.1", 29500, (NodePlan("a", 0, "/runs/r-1", True),
                                                          NodePlan("b", 1, "/home/u/runs/r-1", False)),
                   2, SSHOptions(config=("/x/ssh_config",), identity=("/k",), connect_timeout=3.0),
                   Timing(kill_grace=1))
    assert SSHPlan.from_json(plan.to_json()) == plan


def test_the_probe_command_quotes_the_jobs_python():
    """python: from the job goes into a shell command line on the node: a path with a space or a `;` stays one word."""
    from cockpit.launch.ssh.facts import _JobFleet
    from cockpit.remote import RemotePool

    for python in ("/opt/my env/bin/python", "/opt/py;touch /tmp/pwned"):
        cmd = _JobFleet(["n1"], RemotePool(), python, 5.0, None).probe_command("n1")
        assert shlex.split(cmd)[:3] == [python, "-m", "cockpit.node.probe"]


def test_stop_names_what_survives_sigkill(tmp_path):
    """A process that SIGKILL cannot end (on a node: one stuck in the kernel) is what the stop reports left. Here
    it is the init of a pid namespace, which ignores every signal it has no handler for when signalled from
    inside: the stop runs in that namespace. A respawning parent would race the stop's last listing under load."""
    run_id = f"t-{secrets.token_hex(4)}"
    init = subprocess.Popen([require_tool("unshare"), "--pid", "--fork", "--mount-proc", "env",
                             f"{contract.RUN_ID}={run_id}", "sleep", "60"],
                            start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        host_pid = wait_for(lambda: procs.run_pids(run_id), what="the namespace's init")[0]
        r = subprocess.run([require_tool("nsenter"), "-t", str(host_pid), "-p", "-m", "sh", "-c",
                            stop_script(run_id, 0.3)], capture_output=True, text=True, timeout=30)
        # found 1; SIGKILLed after the grace and again after the wrapper wait; left: pid 1, a `sleep`
        assert r.stdout.split() == ["1", "2", "1", "1:sleep"], (r.stdout, r.stderr)
    finally:
        os.killpg(init.pid, signal.SIGKILL)
        init.wait(5)
    wait_for(lambda: procs.run_pids(run_id) == [], what="the run's processes to end")


def test_a_node_whose_processes_survive_sigkill_is_given_up_on_after_a_few_sweeps(tmp_path):
    """Without a cap the run would stay "running" forever, sweeping a process stuck in the kernel."""
    from cockpit.launch.ssh.unit import SWEEP_TRIES, SSHRun
    from cockpit.run.store import RunStatus, read_status

    class Stuck:
        calls = 0

        async def run(self, argv, timeout):
            Stuck.calls += 1
            return types.SimpleNamespace(ok=True, stdout="3 3 1 4242:python3\n", stderr="", exit_status=0)

    plan = SSHPlan("r-1", "/opt/py", "10.0.0.1", 29500, (NodePlan("a", 0, str(tmp_path), True),), 1,
                   timing=Timing(kill_grace=0.1))
    run = SSHRun(RunStatus("r-1", "t", "ssh", "/j.yaml", ["a"], 1), tmp_path, plan)
    run.remote = lambda host: Stuck()
    [node] = run.nodes
    try:
        for _ in range(SWEEP_TRIES):
            assert not node.swept
            asyncio.run(run._sweep(node))
    finally:
        run.loop.close()
    assert node.swept and Stuck.calls == SWEEP_TRIES
    assert "4242:python3" in node.stopped and "given up on" in node.stopped
    run.sync()
    assert "4242:python3" in read_status(tmp_path).note


def test_the_stop_grace_comes_from_cockpit_stop_then_cockpit_run_then_the_plan(tmp_path):
    from cockpit.launch.ssh.plan import request_stop
    from cockpit.launch.ssh.unit import SSHRun
    from cockpit.run.store import RunStatus

    plan = SSHPlan("r-1", "/opt/py", "10.0.0.1", 29500, (NodePlan("a", 0, str(tmp_path), True),), 1)
    (tmp_path / "commands").mkdir()
    graces = []
    for run_grace, stop_grace in ((None, None), (7.0, None), (7.0, 2.5)):
        if stop_grace is not None:
            request_stop(tmp_path, stop_grace)
        run = SSHRun(RunStatus("r-1", "t", "ssh", "/j.yaml", ["a"], 1), tmp_path, plan, run_grace)
        run._stop_now()
        run.loop.close()
        graces.append(run.sweep_grace)
    assert graces == [plan.timing.stop_grace, 7.0, 2.5]


def test_stop_gives_each_rank_of_a_real_torchrun_one_sigterm(tmp_path):
    """The node-side stop on a real torchrun run (started here by the local launcher): torchrun signals each
    worker's group, so the stop leaves the rank wrappers and their ranks to it (as cockpit.launch.procs.first_term
    does); signalling them besides would deliver SIGTERM two or three times, and Lightning's handler acts on
    each."""
    from helpers import REPO

    from cockpit.run.store import list_runs

    job = tmp_path / "term.yaml"
    job.write_text(f"name: term\nscript: {REPO / 'tests/term_count.py'}\n")
    env = cockpit_env(COCKPIT_RUNS_DIR=str(tmp_path / "runs"), NO_COLOR="1")
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(job), "-q", "--grace", "30"], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_dir = wait_for(lambda: (tmp_path / "runs").is_dir() and list_runs(tmp_path / "runs") and
                       list_runs(tmp_path / "runs")[0][0], 30)

    def logs() -> str:
        return "".join(p.read_text() for p in (run_dir / "logs").glob("rank-*.log"))
    wait_for(lambda: logs().count("term ready") == 2, 90)
    r = sh(stop_script(run_dir.name, 20.0))
    proc.communicate(timeout=60)
    assert r.stdout.split()[1] == "0", r.stdout  # nothing needed SIGKILL
    assert logs().count("term count 1") == 2, logs()
