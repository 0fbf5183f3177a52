"""The suite's own hygiene (tests/conftest.py, helpers.cockpit_env): what the caller's shell holds reaches
neither a test nor the processes it starts, and a test that hangs fails by name within its time bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import PASSED, REPO, cockpit_env, is_leaky

HOSTILE = {"GLOO_SOCKET_IFNAME": "ib0", "NCCL_SOCKET_IFNAME": "ib0", "COCKPIT_RUNS_DIR": "/tmp/elsewhere",
           "COCKPIT_UPDATE_GOLDEN": "1", "CUDA_VISIBLE_DEVICES": "0", "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
           "XDG_CONFIG_HOME": "/nonexistent/config", "XDG_STATE_HOME": "/nonexistent/state", "COLUMNS": "20",
           "NO_COLOR": "1", "PYTHONPATH": "/nonexistent/lib"}
HERE = Path(__file__).relative_to(REPO)


def pytest_in(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=timeout)


def test_a_test_sees_none_of_the_callers_settings(tmp_path_factory):
    assert [k for k in os.environ if is_leaky(k) and k not in ("XDG_CONFIG_HOME", "XDG_STATE_HOME",
                                                                "PYTHONPATH")] == []
    assert os.environ["PYTHONPATH"] == str(REPO)
    base = tmp_path_factory.getbasetemp()
    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME"):  # the test's own, empty
        own = Path(os.environ[var])
        assert own.is_relative_to(base) and own.is_dir() and not any(own.iterdir())


def test_a_subprocess_gets_only_what_the_test_sets():
    env = cockpit_env(COCKPIT_RUNS_DIR="/r", HOME=None)
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    child = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                      timeout=60, check=True).stdout)
    assert set(child) <= {*PASSED, "LANG", "PYTHONPATH", "COCKPIT_RUNS_DIR", "LC_CTYPE"}
    assert child["COCKPIT_RUNS_DIR"] == "/r" and child["PYTHONPATH"] == str(REPO) and "HOME" not in child
    for name in HOSTILE:
        assert name in ("COCKPIT_RUNS_DIR", "PYTHONPATH", "XDG_CONFIG_HOME", "XDG_STATE_HOME") or name not in child


def test_the_same_two_tests_pass_from_a_hostile_shell():
    """pytest started where GLOO_SOCKET_IFNAME=ib0, COCKPIT_RUNS_DIR, COCKPIT_UPDATE_GOLDEN=1, ... are set."""
    tests = [f"{HERE}::test_a_test_sees_none_of_the_callers_settings",
             f"{HERE}::test_a_subprocess_gets_only_what_the_test_sets"]
    r = pytest_in({**os.environ, **HOSTILE}, *tests)
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]


def test_a_hanging_test_fails_by_name_within_its_bound(tmp_path):
    """The per-test bound (pytest-timeout, pyproject.toml) ends a hang as that test's failure; the run goes on."""
    (tmp_path / "test_hangs.py").write_text(
        "import time, pytest\n\n"
        "@pytest.mark.timeout(2)\ndef test_stuck():\n    time.sleep(60)\n\n"
        "def test_after():\n    pass\n")
    r = pytest_in(cockpit_env(), "-c", str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path),
                  str(tmp_path / "test_hangs.py"), timeout=50)
    assert r.returncode == 1, r.stdout[-3000:]
    assert "FAILED" in r.stdout and "test_hangs.py::test_stuck" in r.stdout and "1 passed" in r.stdout
