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
  run is left on any node; only then do the nodes report their exit codes.

torchrun names the failing rank per node only; the supervisor names the earliest failing rank across the
run from the exit records followed here. A torchrun that died before any rank failed (killed, OOM) is the
first failure itself: ``poll()`` keeps it in status.first_failure (rank None, ``agent`` true).
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from cockpit import run_layout as layout
from cockpit.launch.ssh.facts import node_python
from cockpit.launch.ssh.plan import NodePlan, SSHPlan, read_plan, stop_grace
from cockpit.launch.ssh.shell import agent_command, agent_exit_file, parse_started, start_script, stop_script
from cockpit.remote import CommandFailed, RemoteError, RemotePool, Unreachable
from cockpit.run_records import SSH_KEYS, FirstFailure, NodeRecord, SshProcess
from cockpit.runs import RunStatus, first_failure, rank_exits, write_status

TICK = 0.3
SWEEP_TRIES = 3  # sweeps of a node whose processes survive SIGKILL before the run ends without them
_FOLLOWED = re.compile(r"^(logs|metrics)/[^/]+$")


def make_ssh_nodes(status: RunStatus, run_dir: Path, grace: float | None = None) -> list:
    """The supervisor's nodes for an ssh run (started, or failed to start, when this returns). ``grace``:
    the supervisor's --grace (cockpit run --grace), for a stop instead of the plan's."""
    run = SSHRun(status, run_dir, read_plan(run_dir), grace)
    run.start()
    return run.nodes


class SSHNode:
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

    # -- in the run's event loop ---------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.exit_code is not None

    async def start(self) -> None:
        local = layout.node_script(self.run.run_dir, self.node_rank)
        text = None if self.plan.shared else local.read_text(encoding="utf-8")
        script = start_script(self.plan.run_dir, self.host, self.node_rank, text)
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
                now = time.monotonic()
                self.unreachable_since = self.unreachable_since or now
                self.note = f"following: {exc}"
                self.run.changed()
                if self.run.stopping and now - self.unreachable_since > self.run.plan.timing.give_up:
                    self.end(255, time.time(), f"unreachable for {now - self.unreachable_since:.0f} s while "
                             "stopping the run: its processes may still be running there", "lost")
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

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
        p = self.plan
        args = {"run_dir": p.run_dir, "exit_file": agent_exit_file(p.run_dir, self.host), "pid": self.pid,
                "start": self.start_ticks, "copy": not p.shared, "offsets": self.offsets}
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
        if "path" in msg:
            self._write(msg)
        elif self.done:
            return  # draining: the end is known already
        elif "exit" in msg:
            code = int(msg["exit"])
            how = f"killed by {_signal_name(code - 128)}" if code > 128 else f"exit code {code}"
            self.end(code, float(msg["time"]), f"torchrun ended: {how}", "exited")
        elif "gone" in msg:
            self.end(255, float(msg["time"]), "the node's launch shell vanished without an exit record "
                     "(killed, or the node rebooted)", "lost")
        elif msg.get("hello") and self.note and self.note.startswith("following:"):
            self.note = None
            self.run.changed()

    def _write(self, msg: dict) -> None:
        rel = msg["path"]
        if self.plan.shared or not _FOLLOWED.match(rel) or ".." in rel:
            return
        path = self.run.run_dir / rel
        path.parent.mkdir(mode=0o700, exist_ok=True)
        if msg.get("truncate"):
            path.write_bytes(b"")
            self.offsets[rel] = 0
            return
        data = base64.b64decode(msg["data"])
        with open(path, "r+b" if path.exists() else "wb") as f:
            f.seek(int(msg["offset"]))
            f.write(data)
        self.offsets[rel] = int(msg["offset"]) + len(data)

    def end(self, code: int, when: float, note: str, state: str) -> None:
        self.exit_code, self.ended, self.note, self.state = code, when, note, state
        if code != 0:
            self.run.node_failed(self, code, when, note)
        self.run.changed()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class SSHRun:
    """All nodes of one ssh run: start, follow, coordinated teardown. Lives in the supervisor."""

    def __init__(self, status: RunStatus, run_dir: Path, plan: SSHPlan, grace: float | None = None):
        self.status, self.run_dir, self.plan = status, run_dir, plan
        self.stop_grace = plan.timing.stop_grace if grace is None else grace
        self.pool = RemotePool(plan.ssh)
        self.nodes = [SSHNode(self, p) for p in plan.nodes]
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

    def node_failed(self, node: SSHNode, code: int, when: float, note: str) -> None:
        if self.swept_since is not None and when >= self.swept_since:
            return  # ended by cockpit's own teardown, not a failure of its own
        if self.node_failure is None or when < self.node_failure.time:
            sig = code - 128 if code > 128 else None
            how = note if code == 255 else (f"killed by {_signal_name(sig)} (status {code})" if sig
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
        if first_failure(rank_exits(self.run_dir)) is not None:
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

    async def _sweep(self, node: SSHNode) -> None:
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


# -- without a supervisor (it was killed): `cockpit stop` and `cockpit attach` ask the nodes themselves ----------
def stop_nodes(run_dir: Path, grace: float, timeout: float = 60.0) -> dict[str, str]:
    """Stop the run's processes on every node of the plan over SSH (SIGTERM, SIGKILL after ``grace``).
    Returns host -> what was found there; a node that could not be reached, or kept processes through
    SIGKILL, says so in its text and is listed by ``left_behind``."""
    plan = read_plan(run_dir)

    async def one(pool: RemotePool, host: str) -> tuple[str, str]:
        try:
            result = await asyncio.wait_for(pool.get(host).run(["sh", "-c", stop_script(plan.run_id, grace)],
                                                               grace + timeout), grace + timeout + 5)
        except (RemoteError, asyncio.TimeoutError) as exc:
            return host, f"could not stop: {getattr(exc, 'message', None) or 'no answer'}"
        words = result.stdout.split()
        if len(words) < 3 or not all(w.isdigit() for w in words[:3]):
            return host, f"could not stop: unexpected answer {result.stdout.strip()[:200]!r}"
        if words[2] != "0":
            return host, f"{words[2]} process(es) survived SIGKILL ({' '.join(words[3:])})"
        return host, f"{words[0]} process(es), {words[1]} needed SIGKILL"

    async def go():
        pool = RemotePool(plan.ssh)
        try:
            return dict(await asyncio.gather(*(one(pool, n.host) for n in plan.nodes)))
        finally:
            await pool.close()
    return asyncio.run(go())


def left_behind(stopped: dict[str, str]) -> list[str]:
    return [h for h, text in stopped.items() if text.startswith("could not") or "survived" in text]


def recover(run_dir: Path, status: RunStatus, timeout: float = 30.0) -> RunStatus:
    """An ssh run whose supervisor died (killed, this machine rebooted): its nodes ran on without it. Ask
    each node once: copy what its run directory gained since (logs, metrics, exit records; not for a node
    that shares this one), and whether its torchrun still runs. All ended: the state is worked out from the
    ranks' exit records (cockpit.launch.local.launcher.reconcile). Else the run stays "running", with a note that
    nobody follows it; a node that cannot be asked leaves it at that too."""
    plan = read_plan(run_dir)
    known = {n.host: n for n in status.nodes or ()}
    offsets = {f"{p.parent.name}/{p.name}": p.stat().st_size
               for sub in (layout.LOGS, layout.METRICS) if (run_dir / sub).is_dir() for p in (run_dir / sub).iterdir()
               if p.is_file()}

    run = SSHRun.__new__(SSHRun)  # only for its file writing: no loop, no thread
    run.run_dir, run.plan, run._dirty = run_dir, plan, False

    async def one(pool: RemotePool, p: NodePlan) -> tuple[str, str | None]:
        node = known.get(p.host)
        if node is None or node.pid is None:
            return p.host, "never started"  # (its failure to start is in status.json already)
        copier = SSHNode(run, p)  # its _write puts the copied bytes in place
        copier.offsets = dict(offsets)
        start = node.ssh.start if node.ssh is not None else None
        args = {"run_dir": p.run_dir, "exit_file": agent_exit_file(p.run_dir, p.host), "pid": node.pid,
                "start": start, "copy": not p.shared, "offsets": copier.offsets, "once": True}
        command = agent_command(node_python(pool, p.host, plan.python), "watch", args)
        try:
            result = await asyncio.wait_for(pool.get(p.host).run(command, timeout), timeout + 5)
            if not result.ok:
                raise CommandFailed(p.host, result)
            last = None
            for line in result.stdout.splitlines():
                last = json.loads(line)
                if "path" in last:
                    copier._write(last)
        except (RemoteError, ValueError, OSError, asyncio.TimeoutError) as exc:
            return p.host, f"could not be asked: {getattr(exc, 'message', None) or exc or 'no answer'}"
        return p.host, "running" if last and last.get("running") else None

    async def go():
        pool = RemotePool(plan.ssh)
        try:
            return dict(await asyncio.gather(*(one(pool, p) for p in plan.nodes)))
        finally:
            await pool.close()
    answers = asyncio.run(go())
    going = {h: a for h, a in answers.items() if a is not None and a != "never started"}
    if not going:
        from cockpit.launch.local import launcher as local

        return local.reconcile(run_dir, status)
    status.note = ("the supervisor is gone, nobody follows the run: " + "; ".join(
        f"{h}: {a}" for h, a in going.items()) + " (cockpit attach looks again and copies the logs; "
        "cockpit stop ends it on every node)")
    write_status(run_dir, status)
    return status
