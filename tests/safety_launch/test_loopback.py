"""A local run's rendezvous store listens on 127.0.0.1 only (issue 27, item 3: it listened on `*:PORT`, and
another user read it through the machine's external address). Real `cockpit run`s of the demo job and of a
plain DDP script (torchrun and the legacy launcher), looked at with `ss -ltnp` while they run."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, require_tool, wait_for

from cockpit.launch import procs
from cockpit.render import loopback
from cockpit.run.store import list_runs, read_status

pytestmark = pytest.mark.slow
WILDCARD = {"0.0.0.0", "*", "[::]", "::"}

PLAIN = """import os, sys, time
import torch.distributed as dist
dist.init_process_group("gloo")
deadline = time.monotonic() + 120
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.05)
dist.barrier()
dist.destroy_process_group()
"""


def env_for(tmp_path: Path) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(REPO), "NO_COLOR": "1",
            "COCKPIT_RUNS_DIR": str(tmp_path / "runs")}


def listening(ss: str, pids: set[int] | None = None, port: int | None = None) -> list[tuple[str, int]]:
    """(address, port) of each TCP listener, from `ss -Hltnp`, of ``pids`` or on ``port``."""
    out = []
    lines = subprocess.run([ss, "-Hltnp"], capture_output=True, text=True, timeout=30, check=True).stdout
    for line in lines.splitlines():
        fields = line.split()
        addr, _, lport = fields[3].rpartition(":")
        owners = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if (port is not None and int(lport) == port) or (pids is not None and owners & pids):
            out.append((addr, int(lport)))
    return out


def store_port(runs: Path) -> int | None:
    rows = list_runs(runs)
    script = rows[0][0] / "commands" / "node-0.sh" if rows else None
    found = re.search(r"--master[-_]port=(\d+)", script.read_text()) if script and script.exists() else None
    return int(found.group(1)) if found else None


def check_while_running(ss: str, runs: Path) -> tuple[int, list[tuple[str, int]]]:
    """Once the store listens: the addresses on its port, and every listener of the run's processes."""
    port = wait_for(lambda: store_port(runs), 90, "the run's node script")
    on_port = wait_for(lambda: listening(ss, port=port), 120, f"the store to listen on port {port}")
    status = read_status(list_runs(runs)[0][0])
    return port, on_port + listening(ss, pids=set(procs.run_pids(status.run_id)))


def test_the_demo_jobs_store_listens_on_loopback_only(tmp_path):
    ss = require_tool("ss")
    runs = tmp_path / "runs"
    run = subprocess.Popen([sys.executable, "-m", "cockpit", "run", "jobs/demo.yaml", "-q", "--", "--epochs", "1",
                            "--steps-per-epoch", "3000"], cwd=REPO, env=env_for(tmp_path),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port, seen = check_while_running(ss, runs)
        stop = subprocess.run([sys.executable, "-m", "cockpit", "stop", "last", "--grace", "3"], cwd=REPO,
                              env=env_for(tmp_path), capture_output=True, text=True, timeout=120)
        assert stop.returncode == 0, stop.stderr
        run.wait(120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(30)
    assert ("127.0.0.1", port) in seen
    assert {addr for addr, p in seen if p == port} == {"127.0.0.1"}, seen
    assert not [s for s in seen if s[0] in WILDCARD], seen  # nothing of the run listens on every interface


@pytest.mark.parametrize("runner", ["torchrun", "torch.distributed.launch"])
def test_a_plain_scripts_store_listens_on_loopback_only(tmp_path, runner):
    ss = require_tool("ss")
    (tmp_path / "plain.py").write_text(PLAIN)
    go = tmp_path / "go"
    (tmp_path / "job.yaml").write_text(f"name: plain\nscript: plain.py\nargs: [{go}]\nlauncher: local\n"
                                       f"gpus: none\nprocs_per_node: 2\nrunner: {runner}\n")
    run = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(tmp_path / "job.yaml"), "-q"], cwd=tmp_path,
                           env=env_for(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port, seen = check_while_running(ss, tmp_path / "runs")
        go.touch()
        out, err = run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(30)
    assert run.returncode == 0, out[-2000:] + err[-2000:]
    assert {addr for addr, p in seen if p == port} == {"127.0.0.1"}, seen
    assert not [s for s in seen if s[0] in WILDCARD], seen


def test_a_port_taken_on_loopback_is_said_in_torchruns_output(tmp_path):
    """The program's one line for a port that cannot be had; `cockpit diagnose` reads it as a port in use."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = subprocess.run([sys.executable, "-c", loopback.PROGRAM, "-m", "torch.distributed.run", "--nnodes=1",
                            f"--master-port={port}", "--no-python", "true"], capture_output=True, text=True,
                           timeout=120, cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.strip().splitlines()[-1] == (
        f"cockpit: the rendezvous store cannot listen on 127.0.0.1:{port} ({os.strerror(98)})")
    log = tmp_path / "agent.log"
    log.write_text(r.stderr)
    d = subprocess.run([sys.executable, "-m", "cockpit", "diagnose", str(log)], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path, env=env_for(tmp_path))
    assert f"Port {port} is already in use" in d.stdout, d.stdout


def test_the_program_fits_in_single_quotes():
    assert "'" not in loopback.PROGRAM
