"""Whether a rank that died of SIGKILL was ended by the kernel's OOM killer (host memory), and if so whether its
node or the job is to blame (recover:'s node policy, cockpit.launch.recovery). The evidence is the beats of the
ranks on that node (cockpit.node.rankhook: each second a rank's resident memory, the node's memory and the
node's count of OOM kills, /proc/vmstat oom_kill; the memory is what the ranks may use: the node's, or their
cgroup's limit where lower, as under Slurm's --mem or in a container):

- the OOM killer: the node's OOM-kill count rose after the killed rank's last beat. The rank wrapper
  (cockpit.render.rankwrap) reads the count when the rank has died of SIGKILL, into its exit record; a beat of
  another rank on the same node, written after the killed rank's last one, shows it too. The exit record is
  what a real kill needs: under torchrun the other ranks are SIGTERMed some 0.1 s after the kill, mostly
  before their next beat (measured: a cgroup's OOM kill, tests/autopilot/test_oom_real.py). Without either
  (no hook, an older wrapper and one rank per node) nothing is concluded: the SIGKILL stays a SIGKILL (a
  scheduler, a person, the OOM killer).
- whose memory: the job's ranks on the node held ``held`` KiB at their last beats, of the node's ``total``.
  Where they held at least JOB_SHARE of it, the job fills the node by itself: on any node of that size it runs
  out the same way, so a retry, on this node or another, is no help ("job": not retried). Where they held
  less, most of what ran out went to something outside the job (another job, a leak, a daemon): the node is
  to blame ("node") and the next attempt runs without it (an ssh spare, Slurm --exclude).

Why JOB_SHARE is high (0.8): the beats are up to a second old, and a rank that grows fast held more when it
died than its last beat says, so a job-made OOM can look node-made; a wrong "node" costs one attempt on another
node (where the same OOM then ends the run: recovery.decide stops at a second node's OOM), a wrong "job" stops a
run that a spare would have saved.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cockpit.fs import safeio
from cockpit.run import layout

JOB_SHARE = 0.8
_TAIL = 4096  # a beat line is ~250 bytes: the last one is in the file's last 4 KiB


@dataclass(frozen=True)
class OomVerdict:
    """The OOM killer ended a rank on ``host``; ``blame``: its node, or the job's own memory."""

    blame: Literal["node", "job"]
    host: str
    held_kib: int  # the job's ranks on the node, at their last beats
    total_kib: int  # the memory they may use there: the node's, or their cgroup's limit
    ranks: int  # the job's ranks on the node

    def words(self, rank: int) -> str:
        share = self.held_kib / self.total_kib
        return (f"rank {rank} was killed by the kernel's OOM killer on {self.host} (host memory): the job's "
                f"{self.ranks} rank(s) there held {_gib(self.held_kib)} of the {_gib(self.total_kib)} GiB they may "
                f"use ({share:.0%})")


def judge(beats: dict[int, dict], killed: int, host: str, at_exit: int | None = None) -> OomVerdict | None:
    """The verdict from the last beat of each rank on ``host`` (rank -> beat record) and the node's OOM-kill count
    in the killed rank's exit record (``at_exit``; None: not recorded); None: no OOM kill shown."""
    last = beats.get(killed) or {}
    before, at, total = _num(last.get("oomk")), last.get("t"), _num(last.get("memt"))
    if before is None or not isinstance(at, (int, float)) or not total:
        return None
    later = [n for r, b in beats.items() if r != killed and (n := _num(b.get("oomk"))) is not None
             and isinstance(b.get("t"), (int, float)) and b["t"] > at]
    if at_exit is not None:
        later.append(at_exit)
    if not later or max(later) <= before:
        return None
    held = sum(_num(b.get("rss")) or 0 for b in beats.values())
    blame: Literal["node", "job"] = "job" if held >= JOB_SHARE * total else "node"
    return OomVerdict(blame, host, held, total, len(beats))


def oom_verdict(run_dir: Path, rank: int, host: str) -> OomVerdict | None:
    """``judge`` over the beat files of the ranks on ``host`` in the run's logs/ (this attempt's)."""
    beats = {}
    try:
        names = [p for p in (run_dir / layout.LOGS).iterdir() if p.name.endswith(".beat")]
    except OSError:
        return None
    for path in names:
        parsed = layout.parse_rank_file(path.name)
        if parsed and parsed[1] == host and (beat := _last_beat(path)) is not None:
            beats[parsed[0]] = beat
    return judge(beats, rank, host, _oom_kills_at_exit(layout.rank_file(run_dir, rank, host, "exit")))


def _oom_kills_at_exit(path: Path) -> int | None:
    """The node's OOM-kill count that the rank wrapper wrote into an exit record after a SIGKILL (its third
    field); None where there is none (another end, an older wrapper, no record)."""
    try:
        fields = safeio.read_bytes(path, 256).split()
    except OSError:
        return None
    try:
        return int(fields[2]) if len(fields) >= 3 else None
    except ValueError:
        return None


def _last_beat(path: Path) -> dict | None:
    try:
        data, _whole = safeio.tail_bytes(path, _TAIL)
    except OSError:
        return None
    for line in reversed(data.decode("utf-8", "replace").splitlines()):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # cut at the tail's start, or being written
        return record if isinstance(record, dict) else None
    return None


def _num(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _gib(kib: int) -> str:
    return f"{kib / (1 << 20):.1f}"
