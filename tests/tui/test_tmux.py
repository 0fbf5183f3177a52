"""The TUI in a real terminal: tmux runs `python -m cockpit.tui`, keys go in with send-keys, and what a user
would see comes back with capture-pane. The fleet is this machine, read by the real probe (no GPU here: a
CPU node with its cores); the demo job (CPU, gloo, 2 ranks, 20 steps) is launched from Compose and its
rank lines appear in the run view."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest
import yaml
from helpers import REPO, cockpit_env, require_tool

from cockpit.launch import procs
from cockpit.run.store import list_runs

pytestmark = pytest.mark.slow


class Tmux:
    def __init__(self, tmux: str, name: str, env: dict[str, str]):
        self.tmux, self.name, self.env = tmux, name, env

    def __call__(self, *args: str) -> str:
        r = subprocess.run([self.tmux, "-L", self.name, *args], capture_output=True, text=True, env=self.env,
                           timeout=30)
        assert r.returncode == 0, r.stderr
        return r.stdout

    def alive(self) -> bool:
        r = subprocess.run([self.tmux, "-L", self.name, "has-session", "-t", self.name], capture_output=True,
                           env=self.env, timeout=30)
        return r.returncode == 0

    def pane(self) -> str:
        return self("capture-pane", "-p", "-t", self.name)

    def wait_for(self, *texts: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.pane()
            if all(t in screen for t in texts):
                return screen
            if time.monotonic() > deadline:
                pytest.fail(f"{texts} not on screen after {timeout} s; the screen:\n{screen}")
            time.sleep(0.3)


def test_fleet_table_and_launching_the_demo_in_a_real_terminal(tmp_path):
    tmux_bin = require_tool("tmux")
    job = yaml.safe_load((REPO / "jobs" / "demo.yaml").read_text())
    job.update(script=str(REPO / "jobs" / "demo.py"), args=["--epochs", "1", "--steps-per-epoch", "20"])
    (tmp_path / "demo.yaml").write_text(yaml.safe_dump(job, sort_keys=False))
    runs = tmp_path / "runs"
    env = cockpit_env(COCKPIT_RUNS_DIR=str(runs), XDG_CONFIG_HOME=str(tmp_path / "config"), TERM="xterm-256color")
    tmux = Tmux(tmux_bin, f"cockpit-test-{os.getpid()}", env)
    command = f"cd {tmp_path} && {sys.executable} -m cockpit.tui --job demo.yaml --interval 1"
    tmux("new-session", "-d", "-s", tmux.name, "-x", "120", "-y", "36", command)
    try:
        screen = tmux.wait_for("NODE/GPU", "localhost", "CPU · ", timeout=60)
        assert "F2 Fleet" in screen and f"{os.cpu_count()} cores" in screen
        tmux("send-keys", "-t", tmux.name, "F3")
        screen = tmux.wait_for("✓ valid · local · 1 node × 2 = world 2", "demo.yaml", timeout=30)
        assert "--steps-per-epoch 20" in screen
        tmux("send-keys", "-t", tmux.name, "C-l")
        host = socket.gethostname().split(".")[0]
        screen = tmux.wait_for(f"[{host}:0] [cockpit] start rank=0", f"[{host}:1] [cockpit] start rank=1",
                               timeout=150)
        assert "all ranks" in screen and f"{host}:agent" in screen
        tmux("send-keys", "-t", tmux.name, "q")  # quits; the run goes on detached (it is ended below)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and tmux.alive():
            time.sleep(0.2)
        assert not tmux.alive(), "q did not quit the TUI"
    finally:
        subprocess.run([tmux_bin, "-L", tmux.name, "kill-server"], capture_output=True, env=env)
        for _, status in list_runs(runs):
            procs.kill_run(status.run_id, grace=1.0)
