"""The node agent's `watch` stream, on this side: what to ask it for, and its file messages written into the
local run directory. Shared by the supervisor's nodes (cockpit.launch.ssh.unit), which follow the stream,
and by ``orphan.recover``, which asks once when the supervisor is gone.
"""

from __future__ import annotations

import base64
import os
import re
import signal
from pathlib import Path

from cockpit.launch.ssh.plan import NodePlan
from cockpit.launch.ssh.shell import agent_exit_file
from cockpit.run import layout

_FOLLOWED = re.compile(r"^((logs|metrics)|logs/restart-[0-9]+)/[^/]+$")  # restart-<K>: cockpit.run.layout


def watch_args(plan: NodePlan, pid: int | None, start: str | None, offsets: dict[str, int]) -> dict:
    """The `watch` arguments for one node: its run directory and exit record, its launch shell (pid and
    start ticks), whether to copy files back (not for a node that shares the run directory), from where; each
    round's file messages batched ({"batch": [...]}: ``file_messages``), one line per node per round."""
    return {"run_dir": plan.run_dir, "exit_file": agent_exit_file(plan.run_dir, plan.host), "pid": pid,
            "start": start, "copy": not plan.shared, "offsets": offsets, "batch": True}


def file_messages(msg: dict) -> list[dict]:
    """The file messages (``write_chunk``'s) in one line of the node agent's `watch`: a round's batch of them
    ({"batch": [...]}, which watch_args asks for), or one of its own (an agent asked without "batch"); [] for a
    line about the node (hello, exit, gone, running)."""
    batch = msg.get("batch")
    if isinstance(batch, list):
        return [m for m in batch if isinstance(m, dict) and isinstance(m.get("path"), str)]
    return [msg] if "path" in msg else []


def write_chunk(run_dir: Path, shared: bool, offsets: dict[str, int], msg: dict) -> None:
    """Put a streamed piece of a node's log or metrics file in place under ``run_dir`` and advance
    ``offsets`` (or move a copy the node set aside: ``move_copy``); only files directly under logs/,
    logs/restart-<K>/ or metrics/, nothing for a node that shares ``run_dir``."""
    rel = msg["path"]
    if shared or not _FOLLOWED.match(rel) or ".." in rel:
        return
    if "moved" in msg:
        move_copy(run_dir, offsets, rel, msg["moved"])
        return
    path = run_dir / rel
    if msg.get("truncate"):
        path.parent.mkdir(mode=0o700, exist_ok=True)
        path.write_bytes(b"")
        offsets[rel] = 0
        return
    data, at = base64.b64decode(msg["data"]), int(msg["offset"])
    _write_at(path, data, at)
    offsets[rel] = at + len(data)


def _write_at(path: Path, data: bytes, at: int) -> None:
    """``data`` into ``path`` at offset ``at``, the file made if it is not there (as open's "wb" makes it), its
    folder too; three system calls, not a buffered file object's dozen: a 4,096-rank run's nodes send some
    12,000 pieces a second (a beat, a log line and a metrics record per rank)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except FileNotFoundError:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.pwrite(fd, view, at + len(data) - len(view)):]
    finally:
        os.close(fd)


def move_copy(run_dir: Path, offsets: dict[str, int], rel: str, to: str) -> None:
    """The node set a copied file aside (the rank wrapper, when torchrun restarted the workers: logs/X.exit to
    logs/restart-K/X.exit): move the copy here too, with its offset, so that logs/ holds the current round's
    records alone here as there (cockpit.run.restarts reads the rounds from logs/restart-K/)."""
    if not _FOLLOWED.match(to) or ".." in to or not to.startswith(f"{layout.LOGS}/{layout.RESTART_PREFIX}"):
        return
    (run_dir / to).parent.mkdir(mode=0o700, exist_ok=True)
    if (run_dir / rel).is_file():  # else never copied (set aside before the agent looked): it comes as ``to``
        os.replace(run_dir / rel, run_dir / to)
    if rel in offsets:
        offsets[to] = offsets.pop(rel)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
