"""The rank hook's stack at death (issue 26): a rank killed by a fatal signal (gloo's C++ abort on a collective
mismatch is SIGABRT) leaves its Python stack in logs/rank-R.HOST.stacks, which `cockpit diagnose RUN` reads to
say which collective each rank was in; a script that enabled faulthandler itself keeps its own dump; a forked
child (a DataLoader worker) writes nothing into the rank's file. A real interpreter started as the rank wrapper
starts one (the hook's folder first on PYTHONPATH), without torch."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from cockpit.hang.stacks import parse_dump
from cockpit.insight.cause import FATAL, place_of
from cockpit.run.store import create_run_dir


def run_hooked(run_dir: Path, code: str) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "HOME": str(run_dir.parent), "COCKPIT_RUN_DIR": str(run_dir),
           "COCKPIT_HOST": "h1", "RANK": "3", "PYTHONPATH": str(run_dir / "hook")}
    wrapper = 'export COCKPIT_WRAPPER_PID=$$; "$@" & wait $!'
    return subprocess.run(["bash", "-c", wrapper, "wrap", sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=60)


ABORTS = """
    import os

    def all_reduce():
        os.abort()  # what std::terminate does after gloo's enforce failed

    def train_step():
        all_reduce()

    train_step()
"""


def test_a_rank_killed_by_sigabrt_leaves_its_stack_in_the_rank_file(tmp_path):
    run_dir = create_run_dir(tmp_path, "r")
    r = run_hooked(run_dir, ABORTS)
    assert r.returncode == 134, r.stderr  # bash reports 128 + SIGABRT
    text = (run_dir / "logs" / "rank-3.h1.stacks").read_text()
    assert text.startswith(f"{FATAL}: Aborted"), text
    main = parse_dump(text).main
    assert [f.function for f in main.frames] == ["all_reduce", "train_step", "<module>"]
    place = place_of(text, [])
    assert place is not None and place.frame.function == "all_reduce" and place.frame.line == 5
    assert FATAL not in r.stderr  # the user's log gets nothing of it


def test_a_script_that_enabled_faulthandler_keeps_its_own_dump_and_children_write_nothing(tmp_path):
    run_dir = create_run_dir(tmp_path, "r")
    r = run_hooked(run_dir, """
        import faulthandler, os, sys
        pid = os.fork()
        if pid == 0:
            os.abort()  # a worker process dying: not the rank
        os.waitpid(pid, 0)
        faulthandler.enable(file=sys.stderr)
        os.abort()
    """)
    assert r.returncode == 134
    stacks = run_dir / "logs" / "rank-3.h1.stacks"
    assert FATAL not in (stacks.read_text() if stacks.exists() else "")
    assert f"{FATAL}: Aborted" in r.stderr
