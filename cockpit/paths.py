"""Where cockpit keeps things on this machine (XDG), and how a job file's relative paths resolve."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "cockpit"


def default_runs_dir() -> Path:
    """$COCKPIT_RUNS_DIR, else $XDG_STATE_HOME/cockpit/runs (~/.local/state/cockpit/runs)."""
    explicit = os.environ.get("COCKPIT_RUNS_DIR")
    return Path(explicit) if explicit else state_dir() / "runs"


def job_workdir(job_file: str, workdir: str | None) -> str:
    """The ranks' working directory: ``workdir`` relative to the job file's directory, default that dir."""
    base = Path(job_file).resolve().parent
    return str((base / os.path.expanduser(workdir)).resolve() if workdir else base)
