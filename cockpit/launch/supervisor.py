"""The run supervisor: a small detached process (stdlib only) that owns one run from start to end.

`cockpit run` starts it in a session of its own and then only watches files, so closing or killing the
cockpit never stops training, and failure handling does not depend on anyone watching:

- starts each node's rendered script (local: one torchrun), its output in logs/agent.<host>.log;
- records every rank's end as the rank wrapper reports it, and the first failure (earliest non-zero exit);
- when a rank fails, gives torchrun ``grace`` seconds to tear the rest down, then stops every process of
  the run itself (found by run id, see cockpit.procs), so nothing hangs in a collective or an exit barrier;
- on SIGTERM (`cockpit stop`, Ctrl-C in `cockpit run`): SIGTERM to torchrun, which passes it to the ranks
  (cockpit.train checkpoints at the next step), SIGKILL for whatever is left after ``grace``;
- writes status.json atomically at every change; the final state is succeeded, failed or stopped.

    python -m cockpit.launch.supervisor RUN_DIR [--grace SECONDS]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from cockpit import procs
from cockpit.runs import RunStatus, first_failure, rank_exits, read_status, write_status

POLL = 0.2


class LocalNode:
    """One node's script run as a child process of the supervisor."""

    def __init__(self, script: Path, host: str, node_rank: int, run_dir: Path):
        log = open(run_dir / "logs" / f"agent.{host}.log", "ab")  # noqa: SIM115 (kept open for the child)
        self.proc = subprocess.Popen(["bash", str(script)], stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True, cwd=run_dir)
        log.close()
        self.host, self.node_rank = host, node_rank

    def poll(self) -> int | None:
        rc = self.proc.poll()
        return None if rc is None else (128 - rc if rc < 0 else rc)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def describe(self) -> dict:
        return {"host": self.host, "node_rank": self.node_rank, "pid": self.proc.pid, "exit_code": self.poll()}


def make_nodes(status: RunStatus, run_dir: Path, grace: float | None = None) -> list:
    """The units of work of a run, by launcher. Each has poll() -> exit code or None, terminate(),
    describe() -> dict for status.json."""
    if status.launcher == "local" and any("trial" in n for n in status.nodes):
        from cockpit.launch.local_sweep import make_trial_nodes

        return make_trial_nodes(status, run_dir, 10.0 if grace is None else grace)
    if status.launcher == "local":
        return [LocalNode(run_dir / "commands" / f"node-{n}.sh", host, n, run_dir)
                for n, host in enumerate(status.hosts)]
    if status.launcher == "slurm":
        from cockpit.launch.slurm_node import make_slurm_nodes

        return make_slurm_nodes(status, run_dir)
    if status.launcher == "ssh":
        from cockpit.launch.ssh_node import make_ssh_nodes

        return make_ssh_nodes(status, run_dir, grace)
    raise SystemExit(f"cockpit supervisor: launcher {status.launcher!r} has no supervisor support")


class Supervisor:
    def __init__(self, run_dir: Path, grace: float):
        self.run_dir = run_dir
        self.grace = grace
        status = read_status(run_dir)
        if status is None:
            raise SystemExit(f"cockpit supervisor: no readable status.json in {run_dir}")
        self.status: RunStatus = status
        self.nodes: list = []
        self.stop_at: float | None = None
        self.failed_at: float | None = None
        self.escalated = False
        self.watchdog = None  # cockpit.hang: progress, stalls, stragglers

    def request_stop(self, *_: object) -> None:
        self.status.stop_requested = True

    def start(self) -> None:
        s = self.status
        s.supervisor = {"pid": os.getpid(), "start": procs.start_time(os.getpid())}
        self.nodes = make_nodes(s, self.run_dir, self.grace)
        s.nodes = [node.describe() for node in self.nodes]
        if not any("trial" in n for n in s.nodes):  # a sweep's trials are runs of their own
            from cockpit.hang.watchdog import Watchdog

            self.watchdog = Watchdog(self.run_dir, s)
        s.state, s.started = "running", time.time()
        write_status(self.run_dir, s)

    def step(self) -> bool:
        """One look at the run; True while it is still going."""
        now = time.monotonic()
        changed = self._record_exits(now)
        if self.watchdog is not None and not self.status.stop_requested:
            changed = self.watchdog.tick() or changed
        if self.status.stop_requested and self.stop_at is None:
            self.stop_at = now
            for node in self.nodes:
                node.terminate()
            changed = True
        started = [t for t in (self.stop_at, self.failed_at) if t is not None]
        if started and not self.escalated and now - min(started) > self.grace:
            self.escalated = True  # torchrun did not finish the teardown in time: do it ourselves
            killed = procs.kill_run(self.status.run_id, grace=2.0) + self._kill_nodes()
            self.status.note = f"stopped the remaining processes after {self.grace:.0f} s ({killed} needed SIGKILL)"
            changed = True
        done = all([node.poll() is not None for node in self.nodes])  # every node polled: a sweep's start there
        if not changed:  # a node moved on (a sweep's trial started or ended)
            changed = [node.describe() for node in self.nodes] != self.status.nodes
        if changed or done:
            self.status.nodes = [node.describe() for node in self.nodes]
            write_status(self.run_dir, self.status)
        return not done

    def _kill_nodes(self) -> int:
        """Nodes with processes of their own run id (a local sweep's trials) are killed by their own hand."""
        from cockpit.launch.local_sweep import TrialNode

        return sum(node.kill() for node in self.nodes if isinstance(node, TrialNode))

    def _record_exits(self, now: float) -> bool:
        exits = rank_exits(self.run_dir)
        if len(exits) == len(self.status.ranks):
            return False
        if len(exits) < len(self.status.ranks):  # a new attempt (Slurm requeue) moved the old records away
            self.failed_at, self.status.first_failure = None, None
        self.status.ranks = {str(r): {**asdict(e), "signal": e.signal} for r, e in sorted(exits.items())}
        first = first_failure(exits)
        if first is not None and self.failed_at is None:
            self.failed_at = now
            self.status.first_failure = {**asdict(first), "signal": first.signal, "describe": first.describe()}
        return True

    def finish(self) -> int:
        leftover = procs.kill_run(self.status.run_id, grace=2.0) if procs.run_pids(self.status.run_id) else 0
        leftover += self._kill_nodes()
        self._record_exits(time.monotonic())
        s = self.status
        codes = [node.poll() or 0 for node in self.nodes]
        s.exit_code = next((c for c in codes if c != 0), 0)
        if s.stop_requested:
            s.state = "stopped"
        else:
            s.state = "succeeded" if s.exit_code == 0 and s.first_failure is None else "failed"
        trials = [n for n in self.nodes if s.launcher == "local" and hasattr(n, "trial")]
        if trials:  # a local sweep: say how its trials ended, and which failed first
            from cockpit.launch.local_sweep import summarize

            s.nodes = [node.describe() for node in self.nodes]
            s.note = summarize(s)
            failed = [t for t in trials if t.info.get("state") == "failed"]
            if failed:
                first = min(failed, key=lambda t: (t.status.ended or 0) if t.status else 0)
                ff = (first.status.first_failure if first.status else None) or {}
                why = f" (rank {ff['rank']} on {ff['host']}: {ff['describe']})" if ff.get("describe") else ""
                s.note += f"; first to fail: trial {first.trial}{why}"
        elif s.state == "failed" and s.first_failure is None:
            bad = next(node for node, c in zip(self.nodes, codes, strict=True) if c != 0) if s.exit_code else None
            where = f"logs/agent.{bad.host}.log" if bad else "the logs"
            why = f"the launcher exited with {s.exit_code} before any rank reported an exit: see {where}"
            s.note = f"{s.note}; {why}" if s.note else why
        if leftover:
            s.note = (s.note + "; " if s.note else "") + f"{leftover} leftover processes needed SIGKILL"
        s.ended = time.time()
        s.nodes = [node.describe() for node in self.nodes]
        write_status(self.run_dir, s)
        return s.exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cockpit.launch.supervisor")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--grace", type=float, default=10.0)
    args = parser.parse_args(argv)
    sup = Supervisor(args.run_dir, args.grace)
    signal.signal(signal.SIGTERM, sup.request_stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # detached: a terminal's Ctrl-C is cockpit's to pass on
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    sup.start()
    while sup.step():
        time.sleep(POLL)
    return sup.finish()


if __name__ == "__main__":
    sys.exit(main())
