"""The run supervisor: a small detached process (stdlib only) that owns one run from start to end.

`cockpit run` starts it in a session of its own and then only watches files, so closing or killing the
cockpit never stops training, and failure handling does not depend on anyone watching:

- starts each node's rendered script (local: one torchrun), its output in logs/agent.<host>.log;
- records every rank's end as the rank wrapper reports it, and the first failure (earliest non-zero exit);
- when a rank fails, gives torchrun ``grace`` seconds to tear the rest down, then stops every process of
  the run itself (found by run id, see cockpit.launch.procs), so nothing hangs in a collective or an exit barrier;
  with the job's max_restarts, a failure while torchrun has restarts left is torchrun's to handle: it restarts
  the workers, and the grace starts only once torchrun itself ends (or a stop is asked for); each restart is
  recorded (status.json's ``restarts``, cockpit.run.restarts);
- on SIGTERM (`cockpit stop`, Ctrl-C in `cockpit run`, the TUI's stop, the watchdog's on_stall: stop):
  SIGTERM to torchrun, which passes it to the ranks (cockpit.train checkpoints at the next step), SIGKILL
  for whatever is left after the stop's grace (<run>/stop.json, else ``grace``); rank exits from then on
  are the stop's doing, never a failure;
- writes status.json atomically at every change; the final state is succeeded, failed or stopped. A write
  that fails (a full disk, a read-only file system) keeps the last good status.json, stops the run and
  ends it failed with the reason; a small reserve file, given back at the end, makes room for that last
  write.

    python -m cockpit.launch.supervisor RUN_DIR [--grace SECONDS]
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit import contract
from cockpit.fs.safeio import Untrusted
from cockpit.hang.rankdir import RankDir
from cockpit.launch import attempt_files, procs, recovery, registry
from cockpit.launch.protocol import GivesUp
from cockpit.launch.site import LaunchError
from cockpit.run import layout
from cockpit.run.attempts import Attempt
from cockpit.run.restarts import restart_words, restarts, restarts_left
from cockpit.run.store import (
    RunStatus,
    failure_record,
    first_failure,
    rank_record,
    read_status,
    stop_request,
    write_status,
)
from cockpit.run.trust import check_run_dir

if TYPE_CHECKING:
    from cockpit.hang.watchdog import Watchdog

POLL = 0.2
RESERVE = ".reserve"  # freed when status.json cannot be written (a full disk), so that the last write fits
RESERVE_BYTES = 64 << 10
KILLED = (128 + signal.SIGTERM, 128 + signal.SIGKILL)  # a launcher's exit code after the supervisor's own kill
# A stalled attempt relaunched: its stacks are gathered already, and its ranks cannot checkpoint (a collective
# hangs): a rank that acts on SIGTERM (a plain script's default action) is gone within it, a hung one never is.
STALL_GRACE = 1.0
# Above this many nodes, the nodes' own states (their launchers' processes: a poll and a record each) are looked
# at once a second while nothing else changed, not at every POLL: at 512 nodes, 5 looks a second were a fifth of
# the supervisor's CPU (issue 32). A stop, a failure or another change still looks at once.
MANY_NODES = 64
NODES_EVERY = 1.0


def make_nodes(status: RunStatus, run_dir: Path, grace: float | None = None) -> list:
    """The units of work of a run, started, by its launcher (cockpit.launch.registry). Each has poll() ->
    exit code or None, terminate(), describe() -> its NodeRecord for status.json."""
    return launcher_of(status).start(status, run_dir, grace)


def launcher_of(status: RunStatus):
    try:
        return registry.for_run(status)
    except LaunchError:
        raise SystemExit(f"cockpit supervisor: launcher {status.launcher!r} has no supervisor support") from None


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
        self.stop_grace = grace
        self.write_error: str | None = None  # why status.json could not be written (the run then fails)
        self.watchdog: Watchdog | None = None  # cockpit.hang: progress, stalls, stragglers
        self.launcher = launcher_of(status)
        self.policy = recovery.Policy.of(status)  # None: the run ends at its first failure (no recover:)
        self.fail_grace = grace  # how long torchrun gets to tear a failed (or stalled) attempt down
        self.stalled: dict | None = None  # the stall finding that ended this attempt (recover.on: stall)
        self.outcomes: list[recovery.Outcome] = []  # how the earlier attempts ended
        self.decision: recovery.Decision | None = None  # the last attempt's, once it ended
        self.left_out: frozenset[str] = frozenset()  # nodes recover: left out: their late exit records do not count
        self.timeline: dict[str, float] = {}  # wall times of this attempt's end and the relaunch (_timeline)
        self.rankdir = RankDir(run_dir)  # the rank files of logs/, shared with the watchdog
        self.nodes_due = 0.0  # MANY_NODES: when the nodes' states are looked at next

    def request_stop(self, *_: object) -> None:
        self.status.stop_requested = True

    def save(self) -> None:
        """Write status.json. A failure is recorded (and ends the run), never fatal: the last good file stays."""
        try:
            write_status(self.run_dir, self.status)
        except OSError as exc:
            if self.write_error is None:
                full = " (disk full)" if exc.errno == errno.ENOSPC else ""
                self.write_error = f"cannot write {self.run_dir / 'status.json'}{full}: {exc.strerror or exc}"
                _log(f"cockpit supervisor: {self.write_error}; stopping the run")

    def save_final(self) -> None:
        """The last write: on a full disk the reserve is given back first, so that it fits."""
        try:
            write_status(self.run_dir, self.status)
        except OSError:
            (self.run_dir / RESERVE).unlink(missing_ok=True)
            try:
                write_status(self.run_dir, self.status)
            except OSError as exc:
                _log(f"cockpit supervisor: the run ended {self.status.state} but status.json could not be "
                     f"written: {exc}; status: {self.status.to_json()}")
        (self.run_dir / RESERVE).unlink(missing_ok=True)

    def start(self) -> None:
        s = self.status
        s.supervisor = {"pid": os.getpid(), "start": procs.start_time(os.getpid())}
        resumed = bool(s.attempts) and s.started is not None  # `cockpit run --resume`: the run keeps its start
        self._start_attempt(resumed)
        s.state, s.started = "running", s.started if resumed else time.time()
        self.save()
        try:
            with open(self.run_dir / RESERVE, "wb") as f:
                f.write(b"\0" * RESERVE_BYTES)
        except OSError:
            (self.run_dir / RESERVE).unlink(missing_ok=True)  # no room even for it: nothing to give back later

    def _start_attempt(self, resumed: bool = False) -> None:
        """Start the run's units (again, for a relaunch) with their own watchdog. COCKPIT_ATTEMPT goes into this
        process's environment, which every unit the launcher starts here inherits (the node script sets the
        rest of the contract; this one differs per attempt). ``resumed``: by `cockpit run --resume`, after the
        run had ended (its pause is no part of the goodput: cockpit.run.attempts)."""
        s = self.status
        attempt = len(s.attempts)
        os.environ[contract.ATTEMPT] = str(attempt)
        if self.policy is not None or s.attempts:  # recover:, or a run resumed by `cockpit run --resume`
            s.attempts.append(Attempt(attempt, time.time(), resumed=resumed))
        self.nodes = self.launcher.start(s, self.run_dir, self.grace)
        s.nodes = [node.describe() for node in self.nodes]
        if self.launcher.watched(s):
            from cockpit.hang.watchdog import Watchdog

            self.watchdog = Watchdog(self.run_dir, s, self.launcher.stacks, self.launcher.runs_here, grace=self.grace,
                                     on_stall=self._stall, links=lambda: self.launcher.links(self.run_dir, s),
                                     rankdir=self.rankdir)

    def _stall(self, found: dict) -> bool:
        """The watchdog found a stall (its evidence gathered): with recover.on: stall, end the attempt now and
        relaunch (True: the watchdog's on_stall: stop is not needed); else the job's on_stall applies."""
        if self.policy is None or "stall" not in self.policy.on or self.status.stop_requested:
            return False
        self.stalled = found
        self.failed_at, self.fail_grace = time.monotonic(), min(self.grace, STALL_GRACE)
        self.timeline.setdefault("noticed", time.time())
        blamed = recovery.link_node(found.get("link"))  # cut off (its link dead, or silent): no use waiting for it
        for node in self.nodes:
            node.terminate()
            if blamed is not None and node.describe().host == blamed and isinstance(node, GivesUp):
                node.give_up(f"the stall's link finding blames it: {found['link'].get('text', '?')}")
        return True

    def step(self) -> bool:
        """One look at the run; True while it is still going."""
        now = time.monotonic()
        changed = self._record_exits(now)
        if self.status.max_restarts:
            changed = self._track_restarts() or changed
        if self.failed_at is None and self.status.first_failure is not None and not self._torchrun_restarts():
            self.failed_at = now  # the attempt ends: torchrun gets its grace to tear the rest down
            self.timeline.setdefault("noticed", time.time())
        if self.watchdog is not None and not self.status.stop_requested:
            changed = self.watchdog.tick() or changed
        if self.write_error is not None and not self.status.stop_requested:
            self.status.stop_requested = True  # the run cannot be recorded: end it, as failed (finish)
        if self.status.stop_requested and self.stop_at is None:
            self.stop_at, self.status.stopped_at = now, time.time()
            self.stop_grace = float(stop_request(self.run_dir).get("grace", self.grace))
            for node in self.nodes:
                node.terminate()
            changed = True
        due = [t + g for t, g in ((self.stop_at, self.stop_grace), (self.failed_at, self.fail_grace)) if t is not None]
        if due and not self.escalated and now > min(due):
            self.escalated = True  # torchrun did not finish the teardown in time: do it ourselves
            # A stop's SIGTERM went out already, at the stop: its grace is over. A failure's teardown was
            # torchrun's, which may not have reached every process: they get 2 s of SIGTERM of their own.
            stopping = self.stop_at is not None and now > self.stop_at + self.stop_grace
            # a stalled attempt's ranks hang in a collective or their own code: SIGTERM cannot end them
            grace = 0.0 if stopping or self.stalled is not None else 2.0
            killed = procs.kill_run(self.status.run_id, grace=grace) + self._kill_nodes()
            took = self.stop_grace if stopping else self.fail_grace
            self.status.note = _join(self.status.note if self.status.stop_requested else None,
                                     f"stopped the remaining processes after {took:g} s ({killed} needed SIGKILL)")
            changed = True
        ending = self.stop_at is not None or self.failed_at is not None
        if not (changed or ending or len(self.nodes) <= MANY_NODES or now >= self.nodes_due):
            return True  # many nodes and nothing else changed: their states once a second (MANY_NODES)
        self.nodes_due = now + NODES_EVERY
        done = all([node.poll() is not None for node in self.nodes])  # every node polled: a sweep's start there
        if not changed:  # a node moved on (a sweep's trial started or ended)
            changed = [node.describe() for node in self.nodes] != self.status.nodes
        if changed or done:
            self.status.nodes = [node.describe() for node in self.nodes]
            self.save()
        if self.watchdog is not None and self.watchdog.write_report():  # a new finding's stacks, once it is out
            self.save()  # the report could not be written: the finding no longer names it
        return not done

    def pause(self) -> float:
        """Seconds until the next step: POLL, or less where the watchdog's next look comes sooner (a quiet
        stretch reaching its stall threshold is looked at then, not up to POLL later)."""
        wait = self.watchdog.next_look - time.monotonic() if self.watchdog is not None else POLL
        return POLL if wait <= 0 else min(POLL, wait)

    def _torchrun_restarts(self) -> bool:
        """A rank's failure now is torchrun's to handle: it restarts the workers (the job's max_restarts)."""
        s = self.status
        ended = any(node.poll() is not None for node in self.nodes)
        return restarts_left(s.max_restarts, len(s.restarts), ended, s.stop_requested or self.stalled is not None)

    def _track_restarts(self) -> bool:
        """Read torchrun's restarts so far (logs/restart-<K>/); True where they changed."""
        found = restarts(self.run_dir, self.status.restarts)
        if found == self.status.restarts:
            return False
        for k in range(len(self.status.restarts), len(found)):
            _log(f"cockpit supervisor: {restart_words(found[k], k + 1, self.status.max_restarts or 0)}")
        self.status.restarts = found
        return True

    def _kill_nodes(self) -> int:
        """Nodes with processes of their own run id (a local sweep's trials) are killed by their own hand."""
        return sum(node.kill() for node in self.nodes)

    def _record_exits(self, now: float) -> bool:
        exits = self.rankdir.exits(skip=self.left_out)  # logs/ listed again only when it changed
        if len(exits) == len(self.status.ranks):
            return False
        if len(exits) < len(self.status.ranks):  # a new attempt (Slurm requeue) moved the old records away
            self.failed_at, self.status.first_failure = None, None
        self.status.ranks = {str(r): rank_record(self.run_dir, e) for r, e in sorted(exits.items())}
        stop = self.status.stopped_at
        first = first_failure({r: e for r, e in exits.items() if stop is None or e.time < stop}, self.run_dir)
        if first is not None:
            ff = self.status.first_failure
            # records arrive one by one (an ssh node's over SSH, after a shared node's; a killed rank's wrapper
            # after its peer's): the choice over all of them so far wins
            if ff is None:
                moved = True
            elif ff.rank is None:  # a node's torchrun that ended before any rank: stays unless a rank failed earlier
                moved = first.time < ff.time
            else:
                moved = (ff.rank, ff.host) != (first.rank, first.host)
            if moved:
                self.status.first_failure = failure_record(self.run_dir, first)
        return True

    def _leftovers(self) -> int:
        """Kill what is left of the attempt's processes and record its last exits; how many needed SIGKILL."""
        leftover = procs.kill_run(self.status.run_id, grace=2.0) if procs.run_pids(self.status.run_id) else 0
        leftover += self._kill_nodes()
        self._record_exits(time.monotonic())
        return leftover

    def next_attempt(self) -> bool:
        """The attempt is over: with recover: and a trigger it lists, start the next attempt of the same run
        (True) or say why not (the run's note; False: finish). A stop asked for never relaunches."""
        s = self.status
        if self.policy is None or s.stop_requested or self.write_error is not None:
            return False
        self.timeline["over"] = time.time()
        self._leftovers()
        self.timeline["stopped"] = time.time()
        failed = self.stalled is not None or s.first_failure is not None or any(n.poll() for n in self.nodes)
        if not failed:
            return False
        outcome = (recovery.stall_outcome(self.stalled) if self.stalled is not None
                   else recovery.failure_outcome(self.run_dir, s))
        attempt = len(s.attempts) - 1
        leave_out = recovery.blame(outcome)
        blocked = (self.launcher.replacement(self.run_dir, s, leave_out)
                   if leave_out and attempt + 1 <= self.policy.attempts else None)
        self.decision = recovery.decide(self.policy, self.outcomes, outcome, attempt, len(s.hosts), leave_out, blocked,
                                        self.launcher.replacement_hint)
        self.outcomes.append(outcome)
        self.timeline["evidence"] = time.time()
        attempt_files.end_attempt(self.run_dir, s, outcome.end, outcome, self.decision.words)
        s.note = self.decision.words
        if not self.decision.retry:
            return False
        attempt_files.set_aside(self.run_dir, attempt)
        if self.decision.env or self.decision.unset:
            attempt_files.apply_fix(self.run_dir, self.decision.env, self.decision.unset)
        attempt_files.mark(self.run_dir, attempt + 1, outcome, self.policy.attempts)
        self.timeline["marked"] = time.time()
        if not self._relaunch(attempt + 1):
            return False
        self.left_out |= frozenset(self.decision.leave_out)
        s.first_failure, s.ranks, s.findings, s.progress, s.watch, s.restarts = None, {}, [], {}, None, []
        self.failed_at, self.escalated, self.stalled, self.fail_grace = None, False, None, self.grace
        self._start_attempt()
        self._timeline(attempt + 1, outcome.at)
        self.save()
        return True

    def _timeline(self, attempt: int, failed: float | None) -> None:
        """supervisor.log's line of where a relaunch's seconds went, as wall times (tests/bench/bench_restart.py
        reads it): the failure (its exit record) or the stall's finding, noticed, the attempt over (its processes
        ended), the rest stopped, the evidence read, the records moved and marked, the next attempt spawned."""
        times = {"failed": failed, **self.timeline, "spawned": time.time()}
        self.timeline = {}
        _log(f"cockpit supervisor: relaunch timeline of attempt {attempt}: "
             + json.dumps({k: round(v, 3) for k, v in times.items() if v is not None}))

    def _relaunch(self, attempt: int) -> bool:
        """The launcher's part of a relaunch (Slurm: sbatch again, without the blamed node); False, with the
        reason in the note and the attempt's record, where it could not."""
        assert self.decision is not None
        try:
            done = self.launcher.relaunch(self.run_dir, self.status, attempt, self.decision.leave_out)
        except (LaunchError, OSError) as exc:
            words = f"not retried: attempt {attempt} could not be started: {exc}"
            self.decision = recovery.Decision(False, words)
            self.status.note = words
            if self.status.attempts:
                self.status.attempts[-1] = replace(self.status.attempts[-1], decision=words)
            return False
        if done:
            self.decision = replace(self.decision, words=f"{self.decision.words} ({done})")
            self.status.note = self.decision.words
            self.status.attempts[-1] = replace(self.status.attempts[-1], decision=self.decision.words)
        return True

    def finish(self) -> int:
        leftover = self._leftovers()
        s = self.status
        # the watchdog's last look may predate the ranks' ends
        s.progress = {r: replace(p, state="exited") if r in s.ranks else p for r, p in s.progress.items()}
        codes = [node.poll() or 0 for node in self.nodes]
        s.exit_code = next((c for c in codes if c != 0), 0)
        if self.escalated and not s.stop_requested and s.first_failure is not None and s.exit_code in KILLED:
            s.exit_code = 1  # our SIGTERM/SIGKILL ended torchrun after its grace: the job failed, as torchrun says
        if self.write_error is not None:
            s.state, s.exit_code = "failed", s.exit_code or 1
            s.note = _join(f"{self.write_error}: the run was stopped, since it could not be recorded", s.note)
        elif s.stop_requested:
            s.state = "stopped"
        else:
            s.state = "succeeded" if s.exit_code == 0 and s.first_failure is None else "failed"
        own_note = self.launcher.summarize(s, self.nodes)  # a sweep: how its trials ended
        if own_note is not None:
            s.note = own_note
        elif s.state == "failed" and s.first_failure is None:
            bad = next(node for node, c in zip(self.nodes, codes, strict=True) if c != 0) if s.exit_code else None
            where = f"{layout.LOGS}/{layout.agent_log_name(bad.host)}" if bad else "the logs"
            why = f"the launcher exited with {s.exit_code} before any rank reported an exit: see {where}"
            s.note = f"{s.note}; {why}" if s.note else why
        if self.decision is not None and not self.decision.retry:  # not retried, or gave up: the run failed
            s.state, s.exit_code = "failed", 1
        if leftover:
            s.note = _join(s.note, f"{leftover} leftover processes needed SIGKILL")
        if s.state == "failed" and (disk := disk_trouble(self.run_dir)):
            s.note = _join(s.note, disk)
        s.ended = time.time()
        if s.attempts:
            attempt_files.end_attempt(self.run_dir, s, "stopped" if s.state == "stopped" else "succeeded"
                                 if s.state == "succeeded" else "failure")
            attempt_files.account(self.run_dir, s)
        s.nodes = [node.describe() for node in self.nodes]
        self.save_final()
        return s.exit_code


def _join(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


def _log(text: str) -> None:
    """To supervisor.log, which may be on the full disk too (then status.json's note is all there is)."""
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr, flush=True)


def disk_trouble(run_dir: Path) -> str | None:
    """What a full disk did to the run's records, if it looks like it did: little room left in the run
    directory (the reserve not counted), exit records the ranks' wrappers could not write."""
    empty = [p.name for p in layout.exit_records(run_dir) if _size(p) == 0]
    try:
        st = os.statvfs(run_dir)
        free = st.f_bavail * st.f_frsize - (RESERVE_BYTES if (run_dir / RESERVE).exists() else 0)
    except OSError:
        free = None
    said = []
    if free is not None and free < RESERVE_BYTES:
        said.append(f"disk full: {max(free, 0) >> 10} KiB free in {run_dir}")
    if empty:
        said.append(f"{len(empty)} exit record(s) empty, the ranks' wrappers could not write them "
                    f"({', '.join(empty[:4])})")
    return "; ".join(said) or None


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cockpit.launch.supervisor")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--grace", type=float, default=10.0)
    parser.add_argument("--detach", action="store_true", help="fork, print the supervisor's pid on stdout and "
                        "exit at once: the supervisor is nobody's child but init's "
                        "(cockpit.launch.supervision.start)")
    args = parser.parse_args(argv)
    os.umask(0o077)  # the run's files (logs, exit records, metrics, checkpoints) are its owner's only
    try:  # the node scripts, the rank wrapper and the hook are run by path, as the caller: check the path first
        check_run_dir(args.run_dir)
    except Untrusted as exc:
        print(f"cockpit supervisor: {exc}", file=sys.stderr, flush=True)
        return 2
    if args.detach:
        child = os.fork()  # before any thread is started
        if child:
            os.write(1, f"{child}\n".encode())
            os._exit(0)
        os.dup2(2, 1)  # the pipe to the launching cockpit closes; stdout goes to supervisor.log too
    sup = Supervisor(args.run_dir, args.grace)
    signal.signal(signal.SIGTERM, sup.request_stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # detached: a terminal's Ctrl-C is cockpit's to pass on
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    sup.start()
    while True:
        while sup.step():
            time.sleep(sup.pause())
        if not sup.next_attempt():
            break
    return sup.finish()


if __name__ == "__main__":
    sys.exit(main())
