"""A RUN argument no file system can hold (issue 27, item 8: `OSError: File name too long` in six commands) is
one clear line and exit 2 in every command that takes one, before the file system is asked."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import REPO

LONG_NAME = "a" * 300  # one name over NAME_MAX (255 bytes)
LONG_PATH = "ab/" * 1400  # short names, the whole over PATH_MAX (4096 bytes)
COMMANDS = [["logs"], ["logs", "-f"], ["attach"], ["stop"], ["stacks"], ["diagnose"], ["plot"], ["sweep", "show"],
            ["sweep", "rerun", "--failed"]]


CASES = [(c, LONG_NAME) for c in COMMANDS] + [(["logs"], LONG_NAME + "/trial-1"), (["logs"], "x/" + LONG_NAME),
                                               (["logs"], LONG_PATH), (["diagnose"], LONG_PATH)]


@pytest.mark.parametrize(("command", "ref"), CASES, ids=[f"{' '.join(c)} {r[:6]}{len(r)}" for c, r in CASES])
def test_a_ref_too_long_for_a_file_name_is_one_line(tmp_path, command, ref):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO),
           "COCKPIT_RUNS_DIR": str(tmp_path / "runs")}
    r = subprocess.run([sys.executable, "-m", "cockpit", *command[:2], ref, *command[2:]], capture_output=True,
                       text=True, cwd=tmp_path, env=env, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and r.stdout == "", r.stderr[-2000:]
    [line] = r.stderr.splitlines()
    assert line.startswith("cockpit: ") and "Traceback" not in line
    assert "longer than a file name can be (255)" in line or "longer than a path can be (4095)" in line
    assert len(line) < 300  # the argument is shown shortened
