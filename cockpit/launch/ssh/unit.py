"""Supervisor nodes for ssh runs: one per node, all driven by one SSHRun (an event loop in a thread of the
detached supervisor, over one persistent connection per node).

The supervisor (cockpit.launch.supervisor) polls them like local torchruns. Behind ``poll()``:

- start: the node's script runs detached on the node (cockpit.launch.ssh.shell.start_script), so neither
  cockpit nor a dropped connection ends training;
- follow: the node agent's `watch` streams the node's new log and metrics bytes into the local run
  directory (not for a node that shares it) and then how the node's torchrun ended; after a lost
  connection it resumes where it stopped;
- teardown: the first failure anywhere (a rank's non-zero exit, a torchrun's, a node that vanished) gives
  torchrun ``failure_grace`` seconds to tear its own node down, then every node's run processes are found
  by COCKPIT_RUN_ID and stopped (SIGTERM, SIGKILL after ``kill_grace``); ``terminate()`` (cockpit stop) does
  the same at once with ``stop_grace``. When every node has ended, one last sweep makes sure nothing of the
  run is left on any node; only then do the nodes report their exit codes. With the job's max_restarts, a
  rank's failure while torchrun has restarts left is no failure of the run: torchrun restarts the workers
  (the node's copies of the ended round's exit records move to logs/restart-<K>/ as the node's own did).

torchrun names the failing rank per node only; the supervisor names the earliest failing rank across the
run from the exit records followed here. A torchrun that died before any rank failed (killed, OOM) is the
first failure itself: ``poll()`` keeps it in status.first_failure (rank None, ``agent`` true).

The `watch` stream's arguments and file messages are in cockpit.launch.ssh.stream; a run whose supervisor
is gone is stopped or recovered by cockpit.launch.ssh.orphan.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
import time
import traceback
from pathlib import Path

from cockpit.launch.ssh.facts import node_python
from cockpit.launch.ssh.plan import NodePlan, SSHPlan, read_plan, stop_grace
from cockpit.launch.ssh.shell import agent_command, parse_started, start_script, stop_script
from cockpit.launch.ssh.stream import file_messages, signal_name, watch_args, write_chunk
from cockpit.remote import CommandFailed, RemoteError, RemotePool, Unreachable
from cockpit.run import layout
from cockpit.run.records import SSH_KEYS, FirstFailure, NodeRecord, SshProcess
from cockpit.run.restarts import restarts_left, this_round
from cockpit.run.store import RunStatus, first_failure, rank_exits, write_status

TICK = 0.3
SWEEP_TRIES = 3  # sweeps of a node whose processes survive SIGKILL before the run ends without them


def make_ssh_nodes(status: RunStatus, run_dir: Path, grace: float | None = None) -> list:
    """The supervisor's nodes for an ssh run (started, or failed to start, when this returns). ``grace``:
    the supervisor's --grace (cockpit run --grace), for a stop instead of the plan's."""
    run = SSHRun(status, run_dir, read_plan(run_dir), grace)
    run.start()
    return run.nodes


class SSHUnit:
    """One node of the run as the supervisor sees it."""

    def __init__(self, run: SSHRun, plan: NodePlan):
        self.run, self.plan, self.host, self.node_rank = run, plan, plan.host, plan.node_rank
        self.pid: int | None = None
        self.start_ticks: str | None = None
        self.state = "starting"  # starting | running | exited | lost
        self.exit_code: int | None = None
        self.ended: float | None = None  # wall time the node's torchrun ended (from its exit record)
        self.note: str | None = None
        self.stopped: str | None = None  # what the last sweep found there
        self.swept = False
        self.sweep_tries = 0  # sweeps that left processes behind
        self.drained = False
        self.offsets: dict[str, int] = {}
        self.unreachable_since: float | None = None
        self.given_up: str | None = None  # why the teardown stops waiting for this node (GivesUp), once told
        self._wake = asyncio.Event()  # ends the wait between reconnects early (give_up)

    # -- the supervisor's interface (main thread) ------------------------------------------------------------
    def poll(self) -> int | None:
        """The node's exit code once it has ended and the run's last sweep is done, else None."""
        self.run.sync()
        return self.exit_code if self.run.finished else None

    def terminate(self) -> None:
        self.run.request_stop()

    def describe(self) -> NodeRecord:
        return NodeRecord(self.host, self.node_rank, pid=self.pid, exit_code=self.exit_code, state=self.state,
                          run_dir=self.plan.run_dir, note=self.note,
                          ssh=SshProcess(self.plan.shared, self.start_ticks, self.stopped), null_keys=SSH_KEYS)

    def kill(self) -> int:
        """Its processes are on the node: the node's own teardown stops them."""
        return 0

    def give_up(self, why: str) -> None:
        """The stop waits no longer for this node while it cannot be reached (cockpit.launch.protocol.GivesUp)."""
        self.run.loop.call_soon_threadsafe(self._give_up, why)

    # -- in the run's event loop ---------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.exit_code is not None

    async def start(self) -> None:
        local = layout.node_script(self.run.run_dir, self.node_rank)
        text = None if self.plan.shared else local.read_text(encoding="utf-8")
        attempt = max(len(self.run.status.attempts) - 1, 0)  # the supervisor appended this attempt's record
        script = start_script(self.plan.run_dir, self.host, self.node_rank, text, attempt)
        try:
            result = await self.run.remote(self.host).run(["sh", "-s"], self.run.plan.timing.start_timeout,
                                                          input=script)  # on stdin: never in anyone's `ps`
            if not result.ok:
                raise CommandFailed(self.host, result)
            self.pid, self.start_ticks = parse_started(result.stdout)
            self.state = "running"
        except (RemoteError, ValueError) as exc:
            self.end(255, time.time(), f"could not start the node's script: {exc}", "lost")

    async def follow(self) -> None:
        """Stream the node's files and end; reconnect with backoff while the node is unreachable."""
        delay = 1.0
        while not self.done:
            try:
                await self._watch_once()
                if not self.done:
                    raise Unreachable(self.host, "the node agent stopped without reporting the end")
            except Exception as exc:  # noqa: BLE001 - a bug must not stop following: log it, retry
                if not isinstance(exc, (RemoteError, ValueError, OSError)):
                    traceback.print_exc(file=sys.stderr)
                self.unreachable_since = self.unreachable_since or time.monotonic()
                self.note = f"following: {exc}"
                self.run.changed()
                if self._lost_while_stopping():
                    return
                with contextlib.suppress(asyncio.TimeoutError):  # a pause between reconnects, or give_up
                    await asyncio.wait_for(self._wake.wait(), delay)
                if self._lost_while_stopping():
                    return
                delay = min(delay * 2, 10.0)

    def _give_up(self, why: str) -> None:
        self.given_up = why
        self._wake.set()

    def _lost_while_stopping(self) -> bool:
        """While the run stops: a node unreachable for Timing.give_up, or at once once given up on, ends as
        lost (the stop's doing, not a failure of its own)."""
        since = self.unreachable_since
        if self.done or not self.run.stopping or since is None:
            return self.done
        waited = time.monotonic() - since
        if self.given_up is None and waited <= self.run.plan.timing.give_up:
            return False
        why = f" ({self.given_up})" if self.given_up else ""
        self.end(255, time.time(), f"unreachable for {waited:.0f} s while stopping the run, given up on{why}: its "
                 "processes may still be running there", "lost", failure=False)
        return True

    async def drain(self) -> None:
        """After the last sweep: copy what the node wrote since it ended (its orphaned ranks' last lines and
        exit records), once; a node that cannot be reached keeps what was copied."""
        try:
            if not self.plan.shared and self.state != "lost":
                await asyncio.wait_for(self._watch_once(), self.run.plan.timing.kill_grace + 30)
        except (RemoteError, ValueError, OSError, asyncio.TimeoutError) as exc:
            self.note = f"{self.note}; the last logs could not be copied: {exc}"
        self.drained = True
        self.run.changed()

    async def _watch_once(self) -> None:
        """One `watch` stream, until the node agent reports the end (again, when draining)."""
        args = watch_args(self.plan, self.pid, self.start_ticks, self.offsets)
        stream = await self.run.remote(self.host).stream(self.run.agent("watch", self.host, args))
        try:
            async for line in stream:
                self.unreachable_since = None
                msg = json.loads(line)
                self.handle(msg)
                if "exit" in msg or "gone" in msg:
                    break
        finally:
            await stream.close()

    def handle(self, msg: dict) -> None:
        if "path" in msg or "batch" in msg:  # a round's files (file_messages)
            for one in file_messages(msg):
                write_chunk(self.run.run_dir, self.plan.shared, self.offsets, one)
        elif self.done:
            return  # draining: the end is known already
        elif "exit" in msg:
            code = int(msg["exit"])
            how = f"killed by {signal_name(code - 128)}" if code > 128 else f"exit code {code}"
            self.end(code, float(msg["time"]), f"torchrun ended: {how}", "exited")
        elif "gone" in msg:
            self.end(255, float(msg["time"]), "the node's launch shell vanished without an exit record "
                     "(killed, or the node rebooted)", "lost")
        elif msg.get("hello") and self.note and self.note.startswith("following:"):
            self.note = None
            self.run.changed()

    def end(self, code: int, when: float, note: str, state: str, failure: bool = True) -> None:
        """``failure`` False: the run's teardown ended it (a node given up on), not a failure of its own."""
        self.exit_code, self.ended, self.note, self.state = code, when, note, state
        if code != 0 and failure:
            self.run.node_failed(self, code, when, note)
        self.run.changed()


class SSHRun:
    """All nodes of one ssh run: start, follow, coordinated teardown. Lives in the supervisor."""

    def __init__(self, status: RunStatus, run_dir: Path, plan: SSHPlan, grace: float | None = None):
        self.status, self.run_dir, self.plan = status, run_dir, plan
        self.stop_grace = plan.timing.stop_grace if grace is None else grace
        self.pool = RemotePool(plan.ssh)
        self.nodes = [SSHUnit(self, p) for p in plan.nodes]
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="cockpit-ssh-run", daemon=True)
        self.stopping: str | None = None  # None | "failure" | "stop"
        self.sweep_at: float | None = None  # monotonic time the teardown sweep is due
        self.sweep_grace = plan.timing.kill_grace
        self.swept_since: float | None = None  # wall time of the first sweep: later exits are its doing
        self.node_failure: FirstFailure | None = None
        self.finished = False
        self._dirty = False
        self._sweeps: dict[str, asyncio.Task] = {}
        self._drains: list[asyncio.Task] = []

    def remote(self, host: str):
        return self.pool.get(host)

    def agent(self, command: str, host: str, args: dict) -> str:
        return agent_command(node_python(self.pool, host, self.plan.python), command, args)

    # -- main thread -------------------------------------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()
        started = asyncio.run_coroutine_threadsafe(self._start_all(), self.loop)
        started.result(timeout=self.plan.timing.start_timeout + 30)

    def request_stop(self) -> None:
        self.loop.call_soon_threadsafe(self._stop_now)

    def changed(self) -> None:
        self._dirty = True

    def sync(self) -> None:
        """Bring status.json up to date with what the loop learnt (node states, a node's failure)."""
        s, ff = self.status, self.node_failure
        if ff is not None and (s.first_failure is None or ff.time < s.first_failure.time):
            s.first_failure = ff
            self._dirty = True
        if self._dirty:
            self._dirty = False
            s.nodes = [n.describe() for n in self.nodes]
            stopped = [f"{n.host}: {n.stopped}" for n in self.nodes if n.stopped]
            if (self.stopping or any(n.sweep_tries for n in self.nodes)) and stopped:
                s.note = f"cockpit's teardown on every node: {'; '.join(stopped)}"
            write_status(self.run_dir, s)

    # -- the loop ----------------------------------------------------------------------------------------------
    async def _start_all(self) -> None:
        await asyncio.gather(*(n.start() for n in self.nodes))
        for node in self.nodes:
            if node.pid is not None:
                self.loop.create_task(node.follow())
        self.loop.create_task(self._supervise())

    def _stop_now(self) -> None:
        if self.stopping != "stop":
            grace = stop_grace(self.run_dir, self.stop_grace)
            self.stopping, self.sweep_at, self.sweep_grace = "stop", time.monotonic(), grace
            for node in self.nodes:
                node.swept = False

    def node_failed(self, node: SSHUnit, code: int, when: float, note: str) -> None:
        if self.swept_since is not None and when >= self.swept_since:
            return  # ended by cockpit's own teardown, not a failure of its own
        if self.node_failure is None or when < self.node_failure.time:
            sig = code - 128 if code > 128 else None
            how = note if code == 255 else (f"killed by {signal_name(sig)} (status {code})" if sig
                                            else f"exit code {code}")
            self.node_failure = FirstFailure(None, node.host, code, when, f"torchrun on {node.host} (node "
                                             f"{node.node_rank}), before any rank failed: {how}",
                                             agent=True, node_rank=node.node_rank)
        self._failure()

    def _failure(self) -> None:
        if self.stopping is None:
            self.stopping = "failure"
            self.sweep_at = time.monotonic() + self.plan.timing.failure_grace

    async def _supervise(self) -> None:
        while not self.finished:
            try:
                await self._look()
            except Exception:  # noqa: BLE001 - a bug must not leave the run unsupervised: log it, go on
                traceback.print_exc(file=sys.stderr)
            await asyncio.sleep(TICK)
        await self.pool.close()

    async def _look(self) -> None:
        """One round: notice failures, start the sweeps that are due, finish when all is over."""
        exits = rank_exits(self.run_dir, skip=frozenset(self.plan.left_out))
        failed = first_failure(this_round(self.run_dir, exits) if self.status.max_restarts else exits) is not None
        if failed and not self._torchrun_restarts():
            self._failure()
        now = time.monotonic()
        everyone_done = all(n.done for n in self.nodes)
        if everyone_done and (self.sweep_at is None or self.sweep_at > now):
            self.sweep_at = now  # the last sweep (no need to wait out a grace): nothing may outlive it
        if self.sweep_at is not None and now >= self.sweep_at:
            self.swept_since = self.swept_since or time.time()
            for node in self.nodes:
                if not node.swept and node.host not in self._sweeps:
                    self._sweeps[node.host] = self.loop.create_task(self._sweep(node))
        if everyone_done and all(n.swept for n in self.nodes) and not self._sweeps:
            if not self._drains:
                self._drains = [self.loop.create_task(n.drain()) for n in self.nodes]
            if all(n.drained for n in self.nodes):
                self.finished = True
                self.changed()

    def _torchrun_restarts(self) -> bool:
        """A rank's failure now is torchrun's to handle: it restarts the workers while it has restarts left (the
        job's max_restarts; cockpit.run.restarts), as on a local run. The rounds so far are the ones set aside here
        (logs/restart-<K>/, mirrored from a node that does not share the run directory)."""
        made = len(layout.restart_dirs(self.run_dir))
        return restarts_left(self.status.max_restarts, made, any(n.done for n in self.nodes), self.stopping is not None)

    async def _sweep(self, node: SSHUnit) -> None:
        """Stop the run's processes on ``node``; retried while the node is unreachable (until given up)."""
        grace = self.sweep_grace
        try:
            result = await self.remote(node.host).run(["sh", "-c", stop_script(self.plan.run_id, grace)], grace + 30)
            words = result.stdout.split()
            found, killed, left = (words + ["?", "?", "?"])[:3]
            if left not in ("0", "?"):
                node.sweep_tries += 1
                which = f" ({' '.join(words[3:])})" if words[3:] else ""
                node.stopped = f"{left} process(es) survived SIGKILL{which}"
                if node.sweep_tries >= SWEEP_TRIES:  # stuck in the kernel (D state): no point in trying on
                    node.stopped += f", still there after {node.sweep_tries} tries: given up on"
                    node.swept = True
            else:
                node.stopped = f"{found} process(es), {killed} needed SIGKILL"
                node.swept = True
        except RemoteError as exc:
            node.stopped = f"could not stop: {exc.message}"
            if node.done and node.state == "lost":
                node.swept = True  # given up on: its note says its processes may still run
            else:
                await asyncio.sleep(2.0)
        finally:
            self._sweeps.pop(node.host, None)
            self.changed()
