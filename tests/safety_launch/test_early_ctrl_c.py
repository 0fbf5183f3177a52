"""Ctrl-C in the first second of `cockpit run` (issue 27, item 8: two presses exited 130 with no run id while
the run went on to train). Once the run directory exists, an early Ctrl-C either stops the run or says its
id and how to stop it; before, it ends `cockpit run` with nothing made. A real `cockpit run`, real signals;
each press after the first is sent when the previous one was answered (two signals sent before the process
runs at all are one signal to the kernel)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import REPO, wait_for

from cockpit.launch import procs
from cockpit.run.store import list_runs, read_status

pytestmark = pytest.mark.slow
ANSWERS = ("held until it has started", "Ctrl-C again within")  # a press was seen (held, or asked about)


class Run:
    """`cockpit run jobs/demo.yaml` in the background, its stderr lines collected as they come."""

    def __init__(self, tmp_path: Path, *script_args: str):
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(REPO), "NO_COLOR": "1",
               "COCKPIT_RUNS_DIR": str(tmp_path / "runs")}
        self.runs = tmp_path / "runs"
        self.proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", "jobs/demo.yaml", "-q", "--",
                                      *script_args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.on_line = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)
            if self.on_line is not None:
                self.on_line(line)

    @property
    def err(self) -> str:
        return "".join(self.lines)

    def run_dir_made(self) -> Path | None:
        """The run directory as soon as its name exists (before anything is written in it)."""
        names = os.listdir(self.runs) if self.runs.is_dir() else []
        return next((self.runs / n for n in names if n.startswith("demo-")), None)

    def finish(self, timeout: float = 180) -> tuple[int, str]:
        out = self.proc.stdout.read()
        rc = self.proc.wait(timeout)
        self.reader.join(10)
        return rc, out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)


def test_two_early_presses_stop_the_run(tmp_path):
    run = Run(tmp_path, "--epochs", "1", "--steps-per-epoch", "3000")
    try:
        run_dir = wait_for(run.run_dir_made, 60, "the run directory", every=0.002)
        second = []  # the second press, once the first was answered (held, or asked about)

        def press_again(line: str) -> None:
            if not second and any(a in line for a in ANSWERS):
                second.append(line)
                run.proc.send_signal(signal.SIGINT)
        run.on_line = press_again
        run.proc.send_signal(signal.SIGINT)
        rc, out = run.finish()
        wait_for(lambda: (s := read_status(run_dir)) is not None and s.final, 120, "the run's end")
    finally:
        run.kill()
    status = read_status(run_dir)
    assert rc == 130, run.err
    assert f"run {run_dir.name} started" in run.err and "stopping" in run.err, run.err
    assert status.state == "stopped" and status.stop_requested, (status.state, run.err)
    assert "first failure" not in out, out
    wait_for(lambda: procs.run_pids(status.run_id) == [], 60, "no process of the run left")


def test_one_early_press_names_the_run_and_how_to_stop_it_and_the_run_goes_on(tmp_path):
    run = Run(tmp_path, "--epochs", "1", "--steps-per-epoch", "40")
    try:
        run_dir = wait_for(run.run_dir_made, 60, "the run directory", every=0.002)
        run.proc.send_signal(signal.SIGINT)
        rc, out = run.finish()
    finally:
        run.kill()
    status = read_status(run_dir)
    assert rc == 0 and status.state == "succeeded", run.err + out
    assert f"cockpit stop {run_dir.name} stops it later" in run.err, run.err
    assert "stopping" not in run.err and not status.stop_requested


def _children(pid: int) -> list[str]:
    """The command lines of ``pid``'s children."""
    out = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if entry.isdigit() and ppid == pid:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    out.append(f.read().replace(b"\0", b" ").decode(errors="replace"))
        except (OSError, ValueError, IndexError):
            continue
    return out


def test_a_press_during_the_preflight_makes_nothing(tmp_path):
    """Before the run directory exists (here: while the preflight's probe runs) Ctrl-C ends at once."""
    run = Run(tmp_path, "--epochs", "1", "--steps-per-epoch", "3000")
    try:
        wait_for(lambda: any("cockpit.node.probe" in c for c in _children(run.proc.pid)), 60, "the preflight probe",
                 every=0.005)
        run.proc.send_signal(signal.SIGINT)
        rc, _ = run.finish(60)
    finally:
        run.kill()
    assert rc == 130 and "interrupted before the run was made: nothing was started" in run.err, run.err
    assert "Traceback" not in run.err
    assert not (tmp_path / "runs").is_dir() or [n for n in os.listdir(tmp_path / "runs")
                                                if not n.startswith(".")] == []
    assert list_runs(tmp_path / "runs") == []
