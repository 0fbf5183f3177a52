"""The suite's xdist groups (tests/conftest.py) take effect: run as tests/run-all.sh runs it (2 workers, --dist
loadgroup), every test id carries its group and a file's tests all run in one worker. Without that, each test
was scheduled alone: a file's module-scoped demo run started once per worker, and two network-namespace labs or
two Slurm clusters ran side by side."""

from __future__ import annotations

import re
import subprocess
import sys

from helpers import REPO

FILES = ["tests/test_linefold.py", "tests/test_launcher_seam.py"]


def test_under_loadgroup_each_files_tests_carry_its_group_and_run_in_one_worker():
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
                        "-p", "no:cacheprovider", *FILES], capture_output=True, text=True, cwd=REPO, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ran = re.findall(r"^\[(gw\d)\] \[ *\d+%\] PASSED (\S+?)::\S+@(\S+)", r.stdout, re.M)
    assert len(ran) == 8, r.stdout[-3000:]  # test_linefold's 5, test_launcher_seam's 3
    for path in FILES:
        groups = {group for _, p, group in ran if p == path}
        workers = {worker for worker, p, _ in ran if p == path}
        assert groups == {path} and len(workers) == 1, (path, groups, workers)
