"""Per-node aggregation of beats (issue 32): over ssh, a node that does not share the run directory sends what
its ranks wrote in a round (their beats, log lines and metrics records) back in ONE message, not one per changed
file, and the watchdog concludes the same from that copy, rank by rank, as from a copy sent file by file.

The node agent runs as the ssh launcher runs it (`sh -c "python -c SOURCE watch JSON"`, with the arguments
cockpit.launch.ssh.stream.watch_args gives it), against the real stand-in ranks of a one-node local run; its
lines are handled as the supervisor handles them (cockpit.launch.ssh.stream: file_messages, write_chunk). A
second agent, asked without "batch" (as before), copies the same run into a second directory. Between looks the
stand-ins are frozen (SIGSTOP) until both copies equal the node's files, so both looks read the same bytes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from cockpit.hang import gather
from cockpit.hang.progress import Monitor, Verdict
from cockpit.launch.ssh.plan import NodePlan
from cockpit.launch.ssh.shell import agent_command
from cockpit.launch.ssh.stream import file_messages, watch_args, write_chunk
from cockpit.run.store import read_status
from scale import harness

RANKS = 16  # on one node
STRAGGLER = 5
LOOKS = 24  # about 30 s: the straggler rule's 10 s window, then its three confirming looks
ROUND_S = 0.3  # the agent's watch looks this often (cockpit.node.agent.watch's interval)
LINE_LIMIT = 64 * 1024  # asyncio's line limit, which a local stream (cockpit.remote.local) reads under


class Follower:
    """One node agent's `watch` of the run, each of its lines written into ``here`` as SSHUnit.handle does."""

    def __init__(self, run_dir: Path, here: Path, batch: bool):
        plan = NodePlan("standin-node", 0, str(run_dir), shared=False)  # no agent.standin-node.exit: never ends
        args = watch_args(plan, os.getpid(), None, {})
        if not batch:
            del args["batch"]  # the agent as asked before: a line per changed file
        self.here, self.offsets = here, {}
        (here / "logs").mkdir(parents=True)
        self.lines: list[tuple[dict, int]] = []  # the lines that carried files: (the line, its bytes)
        self.proc = subprocess.Popen(["sh", "-c", agent_command(sys.executable, "watch", args)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            msg = json.loads(line)
            files = file_messages(msg)
            for one in files:
                write_chunk(self.here, False, self.offsets, one)
            if files:
                self.lines.append((msg, len(line)))

    def close(self) -> None:
        self.proc.stdin.close()  # the agent ends when cockpit's side goes away
        self.proc.wait(30)
        self.thread.join(30)


def followed(run_dir: Path) -> dict[str, bytes]:
    """The ranks' files the agent copies (logs/rank-*, metrics/), by relative path (not the local supervisor's
    own log: it writes on while the ranks are frozen, and on a node there is none)."""
    out = {}
    for sub in ("logs", "metrics"):
        if not (run_dir / sub).is_dir():
            continue  # not copied yet
        for p in sorted((run_dir / sub).iterdir()):
            if p.is_file() and (sub == "metrics" or p.name.startswith("rank-")):
                out[f"{sub}/{p.name}"] = p.read_bytes()
    return out


def caught_up(run_dir: Path, followers: tuple[Follower, ...]) -> bool:
    node = followed(run_dir)
    return all(followed(f.here) == node for f in followers)


def standins(sim: harness.Sim) -> list[int]:
    mine = []
    for pid in harness.run_pids(sim.run_id):
        with contextlib.suppress(OSError):
            if str(harness.STANDIN).encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                mine.append(pid)
    return mine


@contextlib.contextmanager
def frozen(pids: list[int]):
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def answer(verdict: Verdict) -> tuple:
    """The watchdog's per-rank answer and its verdicts, less each rank's last output time (the copy's mtime, the
    moment the client wrote it, differs between two copies)."""
    ranks = {r: replace(p, last_output=None) for r, p in verdict.ranks.items()}
    return ranks, verdict.straggler, verdict.stalled, verdict.stopped, verdict.phase


@pytest.fixture
def sim(tmp_path):
    (tmp_path / "sim").mkdir()
    made = harness.launch_local(RANKS, 1, home=tmp_path / "sim")
    made.wait_stepping(120)
    yield made
    made.close()


def test_a_node_sends_a_round_in_one_message_and_the_watchdog_answers_the_same(sim, tmp_path):
    sim.straggle(STRAGGLER)
    status = read_status(sim.run_dir)
    pids = standins(sim)
    assert pids
    batched = Follower(sim.run_dir, tmp_path / "batched", True)
    per_file = Follower(sim.run_dir, tmp_path / "one", False)
    began = time.monotonic()
    monitors = {"batched": Monitor(None), "one": Monitor(None)}
    named = set()
    try:
        for _ in range(LOOKS):
            with frozen(pids):
                harness.until(lambda: caught_up(sim.run_dir, (batched, per_file)), 30,
                              "both copies to equal the node's files")
                now = time.time()
                looked = {k: m.look(now, gather.samples(f.here, status, False))
                          for (k, m), f in zip(monitors.items(), (batched, per_file), strict=True)}
            assert answer(looked["batched"]) == answer(looked["one"])
            assert len(looked["batched"].ranks) == RANKS
            named |= {looked["batched"].straggler.rank} if looked["batched"].straggler else set()
            time.sleep(1.0)
    finally:
        batched.close()
        per_file.close()
    rounds = (time.monotonic() - began) / ROUND_S + 1
    assert all(p.step and p.wait is not None for p in looked["batched"].ranks.values())  # metrics and beats read
    assert named == {STRAGGLER}  # the straggler rule named it, from either copy alike
    # one message per node per round (the first, the run's history so far, may take two: BATCH_BYTES)
    assert all("batch" in msg for msg, _ in batched.lines)
    assert len(batched.lines) <= rounds + 1
    assert all(size < LINE_LIMIT for _, size in batched.lines)
    # the agent asked as before: a line per changed file, three a rank a second (a beat, a log line, a record)
    assert all("path" in msg for msg, _ in per_file.lines)
    assert len(per_file.lines) > 5 * len(batched.lines)
    print(f"lines of files: batched {len(batched.lines)} ({sum(s for _, s in batched.lines)} bytes), one per file "
          f"{len(per_file.lines)} ({sum(s for _, s in per_file.lines)} bytes), {LOOKS} looks")
