"""What every test gets, whoever runs the suite and from whatever shell:

- The caller's environment kept out. Variables that change what cockpit, torch, gloo, NCCL, Slurm or the
  terminal do (GLOO_SOCKET_IFNAME=ib0, COCKPIT_RUNS_DIR, COCKPIT_UPDATE_GOLDEN, CUDA_VISIBLE_DEVICES, ...: see
  ``helpers.LEAKY``) are removed from os.environ once at the start and again before each test; each test gets
  its own empty $XDG_CONFIG_HOME and $XDG_STATE_HOME (no cluster.yaml, tui.yaml or runs of the caller's), and
  PYTHONPATH names this checkout, so a subprocess that inherits the environment runs this checkout's cockpit.
  Subprocesses the tests start take ``helpers.cockpit_env(...)``: only what the test sets plus PATH, HOME and
  these.
- A time bound on every test (pytest-timeout, set in pyproject.toml): TIMEOUT s, SLOW_TIMEOUT s for tests
  marked slow and for everything under tests/slurm and tests/multinode (a Slurm or network-namespace cluster
  starting under load). A hang fails that test by name instead of holding the run until CI's limit.
- Golden files are rewritten only by an explicit ``--update-golden`` (tests/render/test_golden.py).
"""

from __future__ import annotations

import itertools
import os

import pytest
from helpers import REPO, is_leaky
from hypothesis import HealthCheck, settings

# Hypothesis times the machine as well as the code: under load (2 cores, the suite two at a time) its too_slow
# health check failed a test whose one example took 1.4 s to draw. What a property test checks is the property;
# how fast is for tests/bench. (A test's own @settings(suppress_health_check=...) replaces this list: name it there.)
settings.register_profile("cockpit", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("cockpit")

SLOW_TIMEOUT = 900  # seconds; the default (300) is pyproject's [tool.pytest.ini_options] timeout
HEAVY_DIRS = ("slurm", "multinode")
_scratch = itertools.count()


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/fixtures/golden/ from the renderers (then review the diff)")


def pytest_configure(config):
    config.addinivalue_line("markers", "xdist_group(name): tests that run in one pytest-xdist worker (_group)")
    for name in [n for n in os.environ if is_leaky(n)]:
        del os.environ[name]
    os.environ["PYTHONPATH"] = str(REPO)


# tryfirst: pytest-xdist's worker reads the xdist_group marks in its own pytest_collection_modifyitems (it turns
# them into the "@group" suffix of each test id that --dist loadgroup schedules by), and a plugin registered after
# this conftest, as xdist's worker is, runs first. Marks added after it are never seen: every test was its own
# unit, a file's module-scoped demo run ran once per worker, and two labs or two Slurm clusters ran side by side.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if (_heavy(item.path) or item.get_closest_marker("slow")) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT))
        item.add_marker(pytest.mark.xdist_group(_group(item)))


# Session fixtures that start something only one of may exist on the machine (the Slurm cluster, the network
# namespace lab, the sshd world, the throwaway users): every test that uses one runs in the same worker.
SHARED = ("slurm_cluster", "lab", "users")


def _group(item) -> str:
    """The xdist group of a test (tests/run-all.sh runs the suite in 2 workers, --dist loadgroup): its shared
    session fixture's, else its file's, so that module-scoped fixtures (a demo run shared by a file) run once."""
    tests = REPO / "tests"
    top = item.path.relative_to(tests).parts[0] if item.path.is_relative_to(tests) else "-"
    shared = next((name for name in SHARED if name in getattr(item, "fixturenames", ())), None)
    return f"{top}:{shared}" if shared else (item.path.relative_to(REPO).as_posix()
                                             if item.path.is_relative_to(REPO) else str(item.path))


def _heavy(path) -> bool:
    tests = REPO / "tests"
    return path.is_relative_to(tests) and path.relative_to(tests).parts[0] in HEAVY_DIRS


@pytest.fixture(autouse=True)
def _hermetic_environ(monkeypatch, tmp_path_factory):
    """os.environ without the caller's leaky variables, with this test's own empty XDG directories."""
    for name in [n for n in os.environ if is_leaky(n)]:
        monkeypatch.delenv(name)
    home = tmp_path_factory.getbasetemp() / "xdg" / str(next(_scratch))
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_STATE_HOME", "state")):
        (home / sub).mkdir(parents=True)
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.setenv("PYTHONPATH", str(REPO))


@pytest.fixture
def update_golden(request) -> bool:
    """True only when pytest was started with --update-golden (never from a variable in the shell)."""
    return bool(request.config.getoption("--update-golden"))
