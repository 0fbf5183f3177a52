"""Shared test helpers (import as `helpers`: tests/ is on pytest's pythonpath). Integration tests use real
processes; nothing here mocks a service."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# The example jobs; jobs/own/ holds scripts written without cockpit in mind.
JOBS = sorted((REPO / "jobs").glob("*.yaml")) + sorted((REPO / "jobs" / "own").glob("*.yaml"))


def require_tool(name: str) -> str:
    """The path of a tool the test command installs; its absence is a failure, never a skip."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: run the README's test command, which installs it")
    return path


def wait_for(predicate, timeout: float, what: str, every: float = 0.1):
    """``predicate()``'s first truthy value, polled every ``every`` s; the test fails after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")
