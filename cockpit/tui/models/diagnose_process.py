"""The run view's diagnosis of a run of many ranks, in a process of its own.

    python -m cockpit.tui.models.diagnose_process RUN_DIR

writes the pickled Report (cockpit.insight.diagnosis.diagnose_run) on stdout. Why a process: the diagnosis of
4,096 ranks' logs parses every line of them for seconds, and in a thread of the UI it held the GIL while keys
waited (key p99 0.8-1.1 s on an ended 4,096-rank run), its memory staying in the UI's heap after. A run of a
few ranks is diagnosed in the UI's thread as before (APART_FROM): a process start would only add to it.
No textual here.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import cockpit
from cockpit.logs.diagnose.model import Report

APART_FROM = 256  # sources (rank logs) from which the run view diagnoses in a process of its own
TIMEOUT = 600.0  # seconds: a diagnosis is bounded in time; past this the process is killed


def diagnose_apart(run_dir: Path, timeout: float = TIMEOUT) -> Report:
    """``run_dir``'s diagnosis from a child process (blocks: call it in a worker thread)."""
    root = str(Path(cockpit.__file__).resolve().parents[1])  # the child imports this cockpit (a worktree, a test's)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-m", __name__, str(run_dir)], capture_output=True, env=env,
                          timeout=timeout, check=False)
    if proc.returncode != 0:
        said = proc.stderr[-2000:].decode(errors="replace").strip()
        raise RuntimeError(f"the diagnosis of {run_dir} exited with {proc.returncode}: {said or 'no message'}")
    report = pickle.loads(proc.stdout)  # noqa: S301 (our own child, over a private pipe)
    if not isinstance(report, Report):
        raise RuntimeError(f"the diagnosis of {run_dir} sent a {type(report).__name__}, not a report")
    return report


def main(argv: list[str] | None = None) -> int:
    from cockpit.insight.diagnosis import diagnose_run
    from cockpit.run.handle import Run

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m cockpit.tui.models.diagnose_process RUN_DIR", file=sys.stderr)
        return 2
    report = diagnose_run(Run.load(Path(args[0])))
    sys.stdout.buffer.write(pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL))
    return 0


if __name__ == "__main__":
    sys.exit(main())
