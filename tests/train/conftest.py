"""Fixtures for the training-runtime tests: start real torch processes (gloo on CPU) and read what they wrote.

Every run gets its own run directory under tmp_path, a fresh master port, PYTHONUNBUFFERED=1, a hermetic
environment (no RANK/SLURM_*/COCKPIT_* leaking in from the caller) and a timeout.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import cockpit_env, wait_for

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "jobs" / "demo.py"
PROBE = Path(__file__).resolve().parent / "probe.py"


def free_port() -> int:
    """A TCP port free right now on 127.0.0.1 (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    """helpers.cockpit_env (no launcher/contract variables of the caller's), PYTHONUNBUFFERED=1 and ``extra``."""
    return cockpit_env(PYTHONUNBUFFERED="1", **extra)


def torchrun_cmd(script: Path, args: list[str], nproc: int = 2) -> list[str]:
    """``python -m torch.distributed.run`` with a static rendezvous on a free local port."""
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
            "--master-addr=127.0.0.1", f"--master-port={free_port()}", str(script), *args]


class Runner:
    """Starts runs in ``root`` (one run directory per name) and reads their outputs."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def run_dir(self, name: str) -> Path:
        return self.root / name

    def env(self, name: str, **extra: str) -> dict[str, str]:
        """The contract for run ``name``: its run dir, ddp/gloo/fp32/seed 0 unless ``extra`` says otherwise."""
        base = {"COCKPIT_RUN_DIR": str(self.run_dir(name)), "COCKPIT_RUN_ID": name,
                "COCKPIT_JOB_NAME": "test", "COCKPIT_BACKEND": "ddp", "COCKPIT_PG_BACKEND": "gloo",
                "COCKPIT_PRECISION": "fp32", "COCKPIT_SEED": "0", "COCKPIT_REQUEUE": "0"}
        return clean_env(**{**base, **extra})

    def run(self, cmd: list[str], env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess:
        """Run ``cmd`` to completion (its own session, killed whole on timeout); stdout+stderr merged."""
        proc = self.start(cmd, env)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            out, _ = proc.communicate()
            pytest.fail(f"timed out after {timeout}s: {' '.join(cmd)}\n{out}")
        return subprocess.CompletedProcess(cmd, proc.returncode, out, "")

    def start(self, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        """Start ``cmd`` in a new session (so a timeout can kill torchrun and its workers together)."""
        return subprocess.Popen(cmd, env=env, cwd=self.root, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def torchrun(self, name: str, script: Path, args: list[str], nproc: int = 2, timeout: float = 90,
                 **extra: str) -> subprocess.CompletedProcess:
        return self.run(torchrun_cmd(script, args, nproc), self.env(name, **extra), timeout)

    def start_torchrun(self, name: str, script: Path, args: list[str], nproc: int = 2,
                       **extra: str) -> subprocess.Popen:
        return self.start(torchrun_cmd(script, args, nproc), self.env(name, **extra))

    def bare_torchrun(self, script: Path, args: list[str], timeout: float = 90) -> subprocess.CompletedProcess:
        """torchrun with no COCKPIT_* variables at all, as a user would start it by hand."""
        return self.run(torchrun_cmd(script, args), clean_env(), timeout)

    @staticmethod
    def kill(proc: subprocess.Popen) -> None:
        """SIGKILL a started run (torchrun and its workers) and reap it."""
        kill_group(proc)
        proc.communicate()

    def python(self, name: str, script: Path, args: list[str], timeout: float = 90,
               **extra: str) -> subprocess.CompletedProcess:
        return self.run([sys.executable, str(script), *args], self.env(name, **extra), timeout)

    def metrics(self, name: str, rank: int) -> list[dict]:
        """Every line of rank ``rank``'s metrics file, parsed (a bad line fails the test)."""
        path = self.run_dir(name) / "metrics" / f"rank-{rank}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    def probe_report(self, name: str, rank: int) -> dict:
        return json.loads((self.run_dir(name) / "probe" / f"rank-{rank}.json").read_text())

    def wait_for(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        """helpers.wait_for, polling every 20 ms."""
        wait_for(predicate, timeout, what, every=0.02)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux /proc); torchrun starts each worker in its own session, so
    killing torchrun's process group would leave the workers running and holding our stdout pipe."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                found += [int(child), *descendants(int(child))]
    return found


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``, its process group and every descendant (torchrun and its workers)."""
    for pid in [*descendants(proc.pid), proc.pid]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture
def runner(tmp_path: Path) -> Runner:
    return Runner(tmp_path)


@pytest.fixture(scope="session")
def runner_at() -> Callable[[Path], Runner]:
    """Runner for a directory of the caller's choosing (for module-scoped runs shared by tests)."""
    return Runner


@pytest.fixture(scope="session")
def paths() -> dict[str, Path]:
    return {"demo": DEMO, "probe": PROBE, "repo": REPO}


@pytest.fixture
def free_port_number() -> int:
    return free_port()
