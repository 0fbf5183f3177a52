"""The ssh launcher's node-side pieces on this machine, with real processes: the detached start, the stop by
run id, the node agent's watch (resume from offsets, the end record), and the plan's JSON form."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import subprocess
import sys
import time

from helpers import require_tool

from cockpit import procs
from cockpit.launch.ssh_plan import NodePlan, SSHPlan, Timing
from cockpit.launch.ssh_shell import agent_command, list_script, parse_started, start_script, stop_script
from cockpit.remote import LocalRemote, SSHOptions


def sh(script: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=timeout)


def wait_for(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (value := predicate()):
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


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
    script = "echo started; sleep 0.3; echo done; exit 3\n"
    r = sh(start_script(str(run_dir), "node/1", 2, script))
    assert r.returncode == 0, r.stderr
    pid, ticks = parse_started(r.stdout)
    assert ticks == procs.start_time(pid)
    assert (run_dir / "commands/node-2.sh").read_text() == script
    exit_file = run_dir / "logs/agent.node_1.exit"
    status, when = wait_for(lambda: exit_file.exists() and exit_file.read_text().split()).copy()
    assert status == "3" and abs(float(when) - time.time()) < 10
    assert (run_dir / "logs/agent.node_1.log").read_text() == "started\ndone\n"


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


def test_agent_check_and_listen_on_this_machine(tmp_path):
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
    assert answer["runs_dir"].endswith("cockpit/runs")
    assert taken["free"] is False and taken["error"]


def test_plan_round_trips_through_json():
    plan = SSHPlan("r-1", "/opt/py", "10.0.0.1", 29500, (NodePlan("a", 0, "/runs/r-1", True),
                                                          NodePlan("b", 1, "/home/u/runs/r-1", False)),
                   2, SSHOptions(config=("/x/ssh_config",), identity=("/k",), connect_timeout=3.0),
                   Timing(kill_grace=1))
    assert SSHPlan.from_json(plan.to_json()) == plan
