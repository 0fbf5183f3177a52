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


NAME_MAX, PATH_MAX = 255, 4096  # Linux: bytes in one name of a path, and in a whole path with its NUL


def too_long(text: str) -> str | None:
    """Why ``text`` cannot name a file on this machine (a name over NAME_MAX bytes, or the whole path over
    PATH_MAX), else None: asked before the file system is, which would answer with an OSError."""
    raw = os.fsencode(text)
    if len(raw) >= PATH_MAX:
        return f"it is {len(raw)} bytes, longer than a path can be ({PATH_MAX - 1})"
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > NAME_MAX:
        return f"it holds a name of {len(longest)} bytes, longer than a file name can be ({NAME_MAX})"
    return None
