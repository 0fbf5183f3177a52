"""The node agent's `watch` stream, on this side: what to ask it for, and its file messages written into the
local run directory. Shared by the supervisor's nodes (cockpit.launch.ssh.unit), which follow the stream,
and by ``orphan.recover``, which asks once when the supervisor is gone.
"""

from __future__ import annotations

import base64
import re
import signal
from pathlib import Path

from cockpit.launch.ssh.plan import NodePlan
from cockpit.launch.ssh.shell import agent_exit_file

_FOLLOWED = re.compile(r"^(logs|metrics)/[^/]+$")


def watch_args(plan: NodePlan, pid: int | None, start: str | None, offsets: dict[str, int]) -> dict:
    """The `watch` arguments for one node: its run directory and exit record, its launch shell (pid and
    start ticks), whether to copy files back (not for a node that shares the run directory), from where."""
    return {"run_dir": plan.run_dir, "exit_file": agent_exit_file(plan.run_dir, plan.host), "pid": pid,
            "start": start, "copy": not plan.shared, "offsets": offsets}


def write_chunk(run_dir: Path, shared: bool, offsets: dict[str, int], msg: dict) -> None:
    """Put a streamed piece of a node's log or metrics file in place under ``run_dir`` and advance
    ``offsets``; only files directly under logs/ or metrics/, nothing for a node that shares ``run_dir``."""
    rel = msg["path"]
    if shared or not _FOLLOWED.match(rel) or ".." in rel:
        return
    path = run_dir / rel
    path.parent.mkdir(mode=0o700, exist_ok=True)
    if msg.get("truncate"):
        path.write_bytes(b"")
        offsets[rel] = 0
        return
    data = base64.b64decode(msg["data"])
    with open(path, "r+b" if path.exists() else "wb") as f:
        f.seek(int(msg["offset"]))
        f.write(data)
    offsets[rel] = int(msg["offset"]) + len(data)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
