"""An ssh run without its supervisor (it was killed, or this machine rebooted): its nodes run on, so
`cockpit stop` and `cockpit attach` ask them themselves, over fresh connections, once. ``stop_nodes`` stops
the run's processes on every node; ``recover`` copies back what each node wrote since and works out the
run's state. The supervisor's own nodes are in cockpit.launch.ssh.unit.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from cockpit.launch.ssh.facts import node_python
from cockpit.launch.ssh.plan import NodePlan, read_plan
from cockpit.launch.ssh.shell import agent_command, stop_script
from cockpit.launch.ssh.stream import file_messages, watch_args, write_chunk
from cockpit.remote import CommandFailed, RemoteError, RemotePool
from cockpit.run import layout
from cockpit.run.store import RunStatus, write_status


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


def copied(run_dir: Path) -> dict[str, int]:
    """The offsets of what a node's `watch` copied here so far (its files' sizes), the rounds torchrun restarted
    from (logs/restart-<K>/) included: the agent then moves only the copies of records the node set aside since
    (cockpit.node.agent.moves), not the current round's over an earlier round's."""
    followed = [run_dir / layout.LOGS, run_dir / layout.METRICS, *layout.restart_dirs(run_dir)]
    return {p.relative_to(run_dir).as_posix(): p.stat().st_size
            for sub in followed if sub.is_dir() for p in sub.iterdir() if p.is_file()}


def recover(run_dir: Path, status: RunStatus, timeout: float = 30.0) -> RunStatus:
    """An ssh run whose supervisor died (killed, this machine rebooted): its nodes ran on without it. Ask
    each node once: copy what its run directory gained since (logs, metrics, exit records; not for a node
    that shares this one), and whether its torchrun still runs. All ended: the state is worked out from the
    ranks' exit records (cockpit.launch.supervision.reconcile). Else the run stays "running", with a note that
    nobody follows it; a node that cannot be asked leaves it at that too."""
    plan = read_plan(run_dir)
    known = {n.host: n for n in status.nodes or ()}
    offsets = copied(run_dir)

    async def one(pool: RemotePool, p: NodePlan) -> tuple[str, str | None]:
        node = known.get(p.host)
        if node is None or node.pid is None:
            return p.host, "never started"  # (its failure to start is in status.json already)
        copied = dict(offsets)
        start = node.ssh.start if node.ssh is not None else None
        args = {**watch_args(p, node.pid, start, copied), "once": True}
        command = agent_command(node_python(pool, p.host, plan.python), "watch", args)
        try:
            result = await asyncio.wait_for(pool.get(p.host).run(command, timeout), timeout + 5)
            if not result.ok:
                raise CommandFailed(p.host, result)
            last = None
            for line in result.stdout.splitlines():
                last = json.loads(line)
                for one in file_messages(last):
                    write_chunk(run_dir, p.shared, copied, one)
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
        from cockpit.launch.supervision import reconcile

        return reconcile(run_dir, status)
    status.note = ("the supervisor is gone, nobody follows the run: " + "; ".join(
        f"{h}: {a}" for h, a in going.items()) + " (cockpit attach looks again and copies the logs; "
        "cockpit stop ends it on every node)")
    write_status(run_dir, status)
    return status
