"""A stand-in for every rank of one node: one small stdlib process that writes, for each rank it impersonates,
the files the rank wrapper (cockpit.render.rankwrap) and the rank hook (cockpit.node.rankhook, with its
spawn companion cockpit.node.rankspawn) write for a real rank, and answers stack requests as the hook does.

It runs as the job's script under ``runner: spawn``, where cockpit's node script starts the script once per
node with COCKPIT_SPAWNS=N and NODE_RANK=K, and the ranks are K*N+i, i < N: the names rankspawn gives the
ranks torch.multiprocessing.spawn starts, and the same ranks torchrun --nproc-per-node=N --node-rank=K gives
its N processes (RANK=K*N+LOCAL_RANK). One process stands for N; it writes, per rank R of host H:

- logs/rank-R.H.pid (this process's pid), .log (a start line, then ``--rate`` progress lines per step, each
  stamped ``t=<time_ns>``, kept open like a rank's stdout), .beat (the hook's JSON line, every second),
  .exit ("status time": 0 at the end, the chosen status when told to die, 143 on SIGTERM), metrics/rank-R.jsonl
  (cockpit.train's record, one per step);
- on SIGURG, a faulthandler-format dump (the hook's beat thread and the main thread) after the marker
  cockpit wrote into .stacks, once per marker per rank (all the ranks share this pid: a real rank is signalled
  once); on a new logs/dump.req, fr.json (the fields cockpit reads of torch's Flight Recorder) and ``req`` in
  the next beat, as the hook does.

What the ranks do comes from ``--control FILE`` (JSON, read at every step), argv giving the same to start
with: ``{"origin": time, "hangs": [{"ranks": [R], "from": step, "until": step}], "straggle": [R],
"die": {"R": status}, "rate": lines, "end": false}``. Steps are due on a clock every process shares (``origin``
+ k x step_s; Node), so the ranks of every process step together, as synchronous ranks do, and a hang
given in clock steps stops them all at the same step (``schedule``): the hung rank in its own code
(load_batch), every other rank in the all_reduce of that step, still beating (the hook's thread lives on):
the stall the watchdog must name. A straggler computes 98% of each step while the others wait 60% of theirs
in all_reduce. ``"end": true`` finishes every rank (exit 0).

    python standin.py [--control FILE] [--rate 1] [--step-s 1] [--steps N] [--hang R] [--straggle R]
                      [--die R:STATUS] [--no-metrics] [--same-lines]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

ROLL_BYTES = 256 * 1024  # the hook's BEAT_ROLL_BYTES
SITE = os.path.join(sys.prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}")
C10D = f"{SITE}/site-packages/torch/distributed"
HERE = os.path.abspath(__file__)


def load_batch() -> None:
    """Never called: its line is where a hung rank's stack says it is stuck (its innermost own frame)."""


def train_step() -> None:
    """Never called: its line is where a rank's stack says it calls all_reduce (or load_batch)."""


def _frame(path: str, line: int, func: str) -> str:
    return f'  File "{path}", line {line} in {func}\n'


def dump_text(rank: int, run_dir: str, state: str) -> str:
    """One faulthandler dump of a rank: the hook's beat thread, then the main thread: in init_process_group
    (starting), in all_reduce (running or waiting), or in its own code (hung, or a straggler computing)."""
    hook = f"{run_dir}/hook/sitecustomize.py"
    ident = 0x7F0000000000 + rank * 0x10000
    text = f"Thread 0x{ident + 0x6C0:016x} (most recent call first):\n" + _frame(hook, 140, "_beat_loop")
    text += "".join(_frame(f"{SITE}/threading.py", line, fn) for line, fn in (
        (982, "run"), (1045, "_bootstrap_inner"), (1002, "_bootstrap")))
    text += f"\nCurrent thread 0x{ident + 0xB80:016x} (most recent call first):\n"
    own = _frame(HERE, train_step.__code__.co_firstlineno, "train_step")
    if state in ("hung", "straggler"):
        text += _frame(HERE, load_batch.__code__.co_firstlineno, "load_batch") + own
    elif state == "starting":
        text += _frame(f"{C10D}/distributed_c10d.py", 1710, "init_process_group") + _frame(hook, 127, "timed")
    else:
        text += (_frame(f"{C10D}/distributed_c10d.py", 3252, "all_reduce") + _frame(f"{C10D}/c10d_logger.py", 83,
                 "wrapper") + _frame(hook, 127, "timed") + own)
    return text + _frame(HERE, main.__code__.co_firstlineno, "<module>")


class Rank:
    """One impersonated rank: its open log and metrics files, its counters and state."""

    def __init__(self, rank: int, host: str, run_dir: str, metrics: bool):
        self.rank, self.run_dir = rank, run_dir
        self.base = f"{run_dir}/logs/rank-{rank}.{host}"
        self.log = open(self.base + ".log", "a", buffering=1)  # noqa: SIM115 - the rank's stdout, held open
        self.metrics = open(f"{run_dir}/metrics/rank-{rank}.jsonl", "a", buffering=1) if metrics else None  # noqa: SIM115
        self.step = self.seq = self.calls = 0
        self.same = False  # --same-lines: every rank's progress line the same text (no rank, seq or stamp)
        self.sync = 0.0
        self.state = "starting"  # starting | running | hung | waiting | straggler | dead | done
        self.since = time.time()  # when it began to wait (in init_process_group, from its start)
        self.beat_bytes = self._size(".beat")
        self.stacks_bytes = self._size(".stacks")

    def _size(self, kind: str) -> int:
        try:
            return os.path.getsize(self.base + kind)
        except OSError:
            return 0

    @property
    def live(self) -> bool:
        return self.state not in ("dead", "done")

    def start(self, world: int, local: int) -> None:
        """What a spawned rank has at its start: its pid file, the hook's first beat, its first line."""
        _write(self.base + ".pid", f"{os.getpid()}\n")
        self.beat(time.time(), None)
        self.log.write(f"[cockpit] start rank={self.rank} world={world} local_rank={local} backend=ddp "
                       f"pg_backend=gloo device=cpu launcher=standin pid={os.getpid()}\n")

    def advance(self, step_s: float, wait_share: float, lines: int) -> None:
        """One step: compute, wait ``wait_share`` of it in all_reduce, print ``lines`` stamped lines."""
        self.step += 1
        self.calls += 1
        self.sync += wait_share * step_s
        loss = 2.0 / (self.step + 1)
        stamp = time.time_ns()
        out = []
        for _ in range(lines):
            self.seq += 1
            out.append(f"[cockpit] step={self.step} epoch=0 loss={loss:.6f}\n" if self.same else
                       f"[cockpit] step={self.step} epoch=0 loss={loss:.6f} samples/s=512.0 rank={self.rank} "
                       f"seq={self.seq} t={stamp}\n")
        self.log.write("".join(out))
        if self.metrics is not None:
            self.metrics.write(json.dumps({"step": self.step, "epoch": 0, "loss": loss, "samples_per_s": 512.0,
                                           "time": stamp / 1e9, "rank": self.rank}) + "\n")

    def beat(self, now: float, handled: str | None) -> None:
        """The hook's beat: in init_process_group (timed, not counted) until the clock starts, in all_reduce
        while waiting for a hung rank; ``last``: the last collective completed."""
        inside = {"starting": "init_process_group", "waiting": "all_reduce"}.get(self.state)
        record = {"t": round(now, 3), "pid": os.getpid(), "sync": round(self.sync, 4), "n": self.calls,
                  "in": inside, "since": round(self.since, 3) if inside else None, "ddp": False,
                  "last": "all_reduce" if self.calls else None, "req": handled, "urg": "hook"}
        line = json.dumps(record, separators=(",", ":")) + "\n"
        roll = self.beat_bytes > ROLL_BYTES
        with open(self.base + ".beat", "w" if roll else "a") as f:
            f.write(line)
        self.beat_bytes = (0 if roll else self.beat_bytes) + len(line)

    def dump_if_asked(self) -> None:
        """Answer a marker cockpit appended to .stacks since the last answer (the SIGURG is shared)."""
        if self._size(".stacks") == self.stacks_bytes:
            return
        with open(self.base + ".stacks", "a") as f:
            f.write(dump_text(self.rank, self.run_dir, self.state))
        self.stacks_bytes = self._size(".stacks")

    def flight_record(self) -> None:
        """What cockpit reads of torch's Flight Recorder: a hung rank never enqueued the collective the others
        wait in."""
        enqueued = self.calls + (1 if self.state == "waiting" else 0)
        record = {"pg_status": {"0": {"last_enqueued_collective": enqueued, "last_completed_collective": self.calls}},
                  "entries": [{"collective_seq_id": enqueued, "is_p2p": False, "profiling_name": "gloo:all_reduce"}]}
        _write(self.base + ".fr.json.tmp", json.dumps(record))
        os.replace(self.base + ".fr.json.tmp", self.base + ".fr.json")

    def end(self, status: int, why: str | None = None) -> None:
        self.state = "dead" if status else "done"  # first: a signal arriving meanwhile must not end it twice
        if why:
            self.log.write(why)
        self.log.write(f"[cockpit] finish rank={self.rank} step={self.step} exit_code={status}\n")
        _write(self.base + ".exit", f"{status} {time.time():.6f}\n")
        self.log.close()
        if self.metrics is not None:
            self.metrics.close()


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


class Control:
    """What the ranks are told to do: argv first, then the control file, read at every step (it is small)."""

    def __init__(self, path: str | None, initial: dict):
        self.path, self.values = path, initial

    def read(self) -> dict:
        if self.path is None:
            return self.values
        try:
            with open(self.path) as f:
                self.values = {**self.values, **json.load(f)}
        except (OSError, ValueError):
            return self.values  # absent, or being replaced: what was read last holds
        return self.values


def schedule(due: int, hangs: list[dict]) -> tuple[int, set[int]]:
    """(steps done, ranks hung) once the clock has called ``due`` steps. A hang {"ranks", "from", "until"} (clock
    steps; until null: still hung) stops those ranks in load_batch of step ``from``, and every other rank in that
    step's all_reduce, so nobody gets past the step before it; once it is lifted the steps lost stay lost. In
    clock steps, every process answers the same, whenever it read the file."""
    lost = 0
    for e in hangs:
        if due < e["from"]:
            break
        if e.get("until") is None or due < e["until"]:
            return max(0, e["from"] - 1 - lost), {int(r) for r in e["ranks"]}
        lost += e["until"] - e["from"]
    return max(0, due - lost), set()


class Node:
    """The ranks of this node, stepped together by a clock they share: steps are due at ``origin`` + k x step_s.
    With a control file the clock starts at the file's "origin" (the harness is the rendezvous, as
    init_process_group is: it writes it once every rank is up); without one, at this process's start."""

    def __init__(self, args: argparse.Namespace):
        run_dir, host = os.environ["COCKPIT_RUN_DIR"], os.environ["COCKPIT_HOST"]
        spawns, node = int(os.environ["COCKPIT_SPAWNS"]), int(os.environ.get("NODE_RANK", "0"))
        world = int(os.environ.get("WORLD_SIZE", spawns))
        os.makedirs(f"{run_dir}/metrics", exist_ok=True)
        self.run_dir, self.args = run_dir, args
        self.ranks = [Rank(node * spawns + i, host, run_dir, args.metrics) for i in range(spawns)]
        for r in self.ranks:
            r.same = args.same_lines
        for i, r in enumerate(self.ranks):
            r.start(world, i)
        own = None if args.control else (int(time.time() / args.step_s) + 1) * args.step_s
        self.control = Control(args.control, {**initial_control(args), "origin": own})
        self.handled: str | None = None
        self.urged = self.answering = False

    def due(self, now: float, origin: float | None) -> int:
        return 0 if origin is None or now < origin else int((now - origin) // self.args.step_s) + 1

    def tick(self, now: float) -> bool:
        """The steps due by now for every rank, then the beats; False once every rank has ended."""
        c = self.control.read()
        target, hung = schedule(self.due(now, c.get("origin")), c.get("hangs") or [])
        straggle = {int(r) for r in c.get("straggle", ())}
        dies = {int(r): int(s) for r, s in (c.get("die") or {}).items()}
        end = bool(c.get("end")) or (self.args.steps and target >= self.args.steps)
        for r in [r for r in self.ranks if r.live]:
            if r.rank in dies:
                r.end(dies[r.rank], f"RuntimeError: injected failure on rank {r.rank} at step {r.step}\n")
                continue
            self._step(r, now, min(target, self.args.steps or target), hung, straggle, int(c["rate"]))
            if end:
                r.end(0)
        self._answer_request()
        for r in self.ranks:
            if r.live:
                r.beat(now, self.handled)
        return any(r.live for r in self.ranks)

    def _step(self, r: Rank, now: float, target: int, hung: set, straggle: set, rate: int) -> None:
        share = (0.02 if r.rank in straggle else 0.6) if straggle else 0.1
        while r.step < target:  # a step missed (a late wake-up on a busy machine) is made up at once
            r.advance(self.args.step_s, share, rate)
        if hung:  # the hung rank in its own code; the others in the all_reduce it never joins
            r.since = r.since if r.state == "waiting" else now
            r.state = "hung" if r.rank in hung else "waiting"
        elif target:
            r.state = "straggler" if r.rank in straggle else "running"

    def _answer_request(self) -> None:
        try:
            with open(f"{self.run_dir}/logs/dump.req") as f:
                request = f.read().strip()
        except OSError:
            return
        if request and request != self.handled:
            self.handled = request
            for r in self.ranks:
                if r.live:
                    r.flight_record()

    def on_urg(self, *_: object) -> None:
        """SIGURG, as faulthandler's handler would take it: at once, even mid-step. One arrives per asked rank
        (they share this pid); one arriving while the ranks are being answered makes another round."""
        self.urged = True
        if self.answering:
            return
        self.answering = True
        try:
            while self.urged:
                self.urged = False
                for r in self.ranks:
                    if r.live:
                        r.dump_if_asked()
        finally:
            self.answering = False

    def end_all(self, status: int) -> None:
        for r in self.ranks:
            if r.live:
                r.end(status)


class Stopped(Exception):
    """SIGTERM or SIGINT: raised out of whatever the main loop was doing, so no file is written twice at once."""


def stop(signum: int, _frame: object) -> None:
    raise Stopped(signum)


def initial_control(args: argparse.Namespace) -> dict:
    die = dict(x.split(":", 1) if ":" in x else (x, "1") for x in args.die)
    hangs = [{"ranks": args.hang, "from": args.hang_from, "until": None}] if args.hang else []
    return {"hangs": hangs, "straggle": args.straggle, "die": die, "rate": args.rate, "end": False}


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="standin.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--control", help="a JSON file of what the ranks do, re-read when it changes")
    p.add_argument("--rate", type=int, default=1, help="log lines per rank per step")
    p.add_argument("--step-s", type=float, default=1.0, help="seconds per step")
    p.add_argument("--steps", type=int, default=0, help="end (exit 0) after this many steps; 0: never")
    p.add_argument("--hang", type=int, action="append", default=[], metavar="RANK")
    p.add_argument("--hang-from", type=int, default=3, metavar="STEP", help="the step --hang ranks stop in")
    p.add_argument("--straggle", type=int, action="append", default=[], metavar="RANK")
    p.add_argument("--die", action="append", default=[], metavar="RANK[:STATUS]")
    p.add_argument("--no-metrics", dest="metrics", action="store_false")
    p.add_argument("--same-lines", action="store_true", help="progress lines without rank, seq and stamp: every "
                   "rank's the same text, as a real job's 'step N loss L' (what logs -f folds)")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    node = Node(parse(argv))
    signal.signal(signal.SIGURG, node.on_urg)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"standin: pid {os.getpid()} is ranks {node.ranks[0].rank}-{node.ranks[-1].rank}", flush=True)
    step_s = node.args.step_s
    try:
        while node.tick(time.time()):
            time.sleep((int(time.time() / step_s) + 1) * step_s - time.time())  # a signal's handler runs at once
    except Stopped as exc:  # what the wrapper records for a rank ended by a signal: 128 + its number
        node.end_all(128 + exc.args[0])
        return 128 + exc.args[0]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
