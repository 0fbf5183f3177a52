"""Shared test helpers (import as `helpers`: tests/ is on pytest's pythonpath). Integration tests use real
processes; nothing here mocks a service."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# The example jobs; jobs/own/ holds scripts written without cockpit in mind.
JOBS = sorted((REPO / "jobs").glob("*.yaml")) + sorted((REPO / "jobs" / "own").glob("*.yaml"))


# What the caller's shell must not decide for a test: cockpit's own settings, the launchers' and libraries'
# contract (a stray GLOO_SOCKET_IFNAME=ib0 fails every real run, CUDA_VISIBLE_DEVICES=0 changes the GPU facts,
# TORCH_DISTRIBUTED_DEBUG=DETAIL segfaults gloo's DDP here), the terminal's size and colours, a tmux or an
# ssh-agent the caller happens to be in, and where configuration and state live.
LEAKY_PREFIXES = ("COCKPIT_", "GLOO_", "NCCL_", "TORCH_", "TORCHELASTIC_", "SLURM_", "SBATCH_", "SALLOC_",
                  "SRUN_", "PMI_", "PMIX_", "OMPI_", "TEXTUAL_", "CUDA_", "NVIDIA_", "ACCELERATE_", "PL_")
LEAKY_NAMES = frozenset({
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "NODE_RANK",
    "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS", "HIP_VISIBLE_DEVICES",
    "NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE", "COLUMNS", "LINES", "TERM", "TMUX", "TMUX_PANE", "SSH_AUTH_SOCK",
    "XDG_CONFIG_HOME", "XDG_STATE_HOME", "PYTHONPATH", "PYTHONWARNINGS", "PYTHONSTARTUP", "PYTHONHOME",
    "PYTHONSAFEPATH", "PYTHONINSPECT", "PYTHONBREAKPOINT",
})
# What a subprocess may take from the test's own os.environ (already scrubbed by tests/conftest.py).
PASSED = ("PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")


# Set by the test run itself, not the caller: pytest-textual-snapshot's scratch directory.
OWN = frozenset({"TEXTUAL_SNAPSHOT_TEMPDIR"})


def is_leaky(name: str) -> bool:
    """A variable of the caller's that a test must not inherit (tests/conftest.py removes them)."""
    return name not in OWN and (name in LEAKY_NAMES or name.startswith(LEAKY_PREFIXES))


def cockpit_env(**extra: str | None) -> dict[str, str]:
    """The whole environment of a subprocess a test starts: PATH, HOME, user, TMPDIR and the test's own XDG
    directories from os.environ, a UTF-8 locale, PYTHONPATH naming this checkout (its cockpit, not another
    installed one), then ``extra`` (a None value removes that variable). Nothing else of the caller's."""
    env = {k: os.environ[k] for k in PASSED if k in os.environ}
    env.update(LANG="C.UTF-8", PYTHONPATH=str(REPO))
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def require_tool(name: str) -> str:
    """The path of a tool the test command installs; its absence is a failure, never a skip."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: run the README's test command, which installs it")
    return path


def wait_for(predicate, timeout: float = 10.0, what: str = "the condition", every: float = 0.1):
    """``predicate()``'s first truthy value, polled every ``every`` s; the test fails after ``timeout`` s, naming
    ``what`` it waited for. The one wait of the suite: no test sleeps before an assert."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")
