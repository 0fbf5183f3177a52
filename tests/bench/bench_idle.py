"""`cockpit logs -f` on a run of 1,024 quiet rank files beside `tail -F` on the same files: CPU of a core while
nothing is written, and how soon a new line shows with both cores busy (issue 29, row 7).

    python tests/bench/bench_idle.py [--files 1024] [--idle 20] [--lines 40] [--load 2] [--rounds 3]
                                     [--json PATH|-] [--smoke]
    python tests/bench/bench_idle.py --engine [--files 1024] [--idle 10] [--rounds 5] [--root DIR]

The run is made with cockpit's own writers (``create_run_dir``, ``write_status``): state running, its
supervisor a live stand-in process (a ``sleep``), ``--files`` ranks over 8 hosts, each rank's log file there.
Per round, the followers start on the same files, each as a user runs it, stdout a pipe read by a thread
that notes the time each line comes:

  tail -F       ``tail -q -n 0 -F FILE...`` (inotify where the file system has it)
  logs -f       ``cockpit logs RUN -f``
  logs -f --no-fold   the same without the fold (a line no other rank repeats waits 0.15 s in the fold): the
                latency goal's arm, like for like with the before, measured before the fold existed

1. Both follow every file: one line is appended to each file and the round waits until both have shown all
   of them, then 5 s for the followers to settle into their quiet pace.
2. Idle: ``--idle`` seconds with nothing written; each follower's CPU (utime + stime of the process and its
   children, from /proc/PID/stat) over that window, as % of one core. Both are measured over the same window,
   so the machine's noise is the same for both.
3. Latency under load: ``--load`` busy processes (``python -c 'while 1: pass'``) start; ``--lines`` lines, each
   stamped with time.time() as it is written to a random file, 100-300 ms apart; each follower's delay from
   the write to the line coming out of its stdout; the busy processes stop.

``--engine``: the tail engine alone (cockpit.logs.tail.Tailer as `logs -f` makes it: lossless, 50 ms quiet
pace), in a child process following ``--files`` quiet files, with inotify and with polling only
(``notify=False``: what NFS and Lustre get), the two arms alternated ``--rounds`` times: each arm's CPU over
``--idle`` seconds after 3 s to settle, as % of one core. ``--root DIR`` adds another checkout's engine (a
``git worktree`` of main: the before) as two more arms, alternated with these.

Printed: per round and median [min-max] over the rounds, idle CPU % and latency p50/p99/max; issue 29's goals:
idle <= 1% of a core, latency p99 no worse than before the idle work (``LATENCY_BEFORE_MS`` below, measured on
main before issue 29 and written down in /work/team/SPEED-BEFORE.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit  # noqa: E402

sys.path.insert(0, str(benchkit.ROOT))

from cockpit.launch import procs  # noqa: E402
from cockpit.run.store import RunStatus, create_run_dir, write_status  # noqa: E402

HOSTS = 8
# the latency goal's arm: the same follow without the fold, which holds a line 0.15 s for the other ranks' copies
# (cockpit.cli.linefold, issue 32, after the before below was measured): like for like with that before
NO_FOLD = "logs -f --no-fold"
GOAL_IDLE_PCT = 1.0
# main before issue 29 (e44e39a): cockpit logs -f's p99 under load, median of 3 rounds [108-166], 1-min load 8.7-11.7
LATENCY_BEFORE_MS: float | None = 109.0
TOKEN = re.compile(rb"bench-idle (ready|line) (\d+) (\d+\.\d+)")
TICK = os.sysconf("SC_CLK_TCK")


class Follower:
    """A follower process whose stdout lines are noted (time, kind, number, stamp) by a reader thread."""

    def __init__(self, name: str, argv: list[str], env: dict):
        self.name = name
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.ready: set[int] = set()
        self.seen: dict[int, float] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            now = time.time()
            m = TOKEN.search(raw)
            if m and m.group(1) == b"ready":
                self.ready.add(int(m.group(2)))
            elif m:
                self.seen.setdefault(int(m.group(2)), now - float(m.group(3)))

    def cpu_s(self) -> float:
        """utime + stime of the process and its descendants now, in seconds."""
        return sum(_ticks(pid) for pid in [self.proc.pid, *_descendants(self.proc.pid)]) / TICK

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGINT)  # a viewer detaches on Ctrl-C
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def _ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)


def _descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for kid in kids.get(todo.pop(), []):
            out.append(kid)
            todo.append(kid)
    return out


def make_run(runs: Path, files: int, supervisor: int) -> tuple[Path, list[Path]]:
    run_dir = create_run_dir(runs, "idle-20270101-000000-0001")
    hosts = [f"node{h}" for h in range(HOSTS)]
    write_status(run_dir, RunStatus(run_id=run_dir.name, name="idle", launcher="local", job_file="/dev/null",
                                    hosts=hosts, world_size=files, state="running", started=time.time(),
                                    supervisor={"pid": supervisor, "start": procs.start_time(supervisor)}))
    paths = [run_dir / "logs" / f"rank-{r}.{hosts[r % HOSTS]}.log" for r in range(files)]
    for p in paths:
        p.touch(mode=0o600)
    return run_dir, paths


def wait_until(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.05)


def append(path: Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


def one_round(args: argparse.Namespace, tmp: Path) -> dict:
    sleeper = subprocess.Popen(["sleep", "3600"])
    busy: list[subprocess.Popen] = []
    followers: list[Follower] = []
    try:
        run_dir, paths = make_run(tmp / "runs", args.files, sleeper.pid)
        env = benchkit.cockpit_env(COCKPIT_RUNS_DIR=str(tmp / "runs"))
        followers = [Follower("tail -F", ["tail", "-q", "-n", "0", "-F", *map(str, paths)], env),
                     Follower("logs -f", benchkit.cockpit_argv("logs", str(run_dir), "-f"), env),
                     Follower(NO_FOLD, benchkit.cockpit_argv("logs", str(run_dir), "-f", "--no-fold"), env)]
        time.sleep(2)  # both open their files; then every file gets a line both must show
        for i, p in enumerate(paths):
            append(p, f"bench-idle ready {i} {time.time():.6f}\n")
        for f in followers:
            wait_until(lambda f=f: len(f.ready) == len(paths), 120, f"{f.name} showing a line of every file")
        time.sleep(5)
        load0 = benchkit.load()
        before = {f.name: f.cpu_s() for f in followers}
        t0 = time.monotonic()
        time.sleep(args.idle)
        wall = time.monotonic() - t0
        idle = {f.name: 100 * (f.cpu_s() - before[f.name]) / wall for f in followers}
        busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.load)]
        time.sleep(1)
        for n in range(args.lines):
            time.sleep(random.uniform(0.1, 0.3))
            append(random.choice(paths), f"bench-idle line {n} {time.time():.6f}\n")
        for f in followers:
            wait_until(lambda f=f: len(f.seen) == args.lines, 30, f"{f.name} showing every new line")
        return {"idle_pct": idle, "latency_ms": {f.name: sorted(v * 1000 for v in f.seen.values()) for f in followers},
                "load_idle": load0, "load_busy": benchkit.load()}
    finally:
        for p in busy:
            p.kill()
            p.wait()
        for f in followers:
            f.stop()
        sleeper.kill()
        sleeper.wait()
        shutil.rmtree(tmp / "runs", ignore_errors=True)


ENGINE_CHILD = """
import asyncio, sys
from cockpit.logs.tail import Tailer
async def main(paths, notify):
    async with Tailer(lossless=True, idle_poll_interval=0.05, batch_window=0.0, notify=notify) as tailer:
        for i, p in enumerate(paths):
            tailer.add(i, p)
        print("ready", flush=True)
        async for _ in tailer:
            pass
asyncio.run(main(sys.argv[2:], sys.argv[1] == "inotify"))
"""


def engine_arm(root: Path, mode: str, paths: list[Path], idle: float) -> float:
    """The engine of ``root`` following ``paths`` (``mode``: inotify or polling): % of a core over ``idle`` s."""
    env = benchkit.cockpit_env()
    env["PYTHONPATH"] = str(root)
    # cwd: ``-c`` puts the working directory first on sys.path; there, it is ``root``'s cockpit that runs
    proc = subprocess.Popen([sys.executable, "-c", ENGINE_CHILD, mode, *map(str, paths)], env=env, cwd=root,
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready", f"{mode}: no start"
        time.sleep(3)  # its first poll of every file, then its quiet pace
        c0, t0 = _ticks(proc.pid), time.monotonic()
        time.sleep(idle)
        return 100 * (_ticks(proc.pid) - c0) / TICK / (time.monotonic() - t0)
    finally:
        proc.kill()
        proc.wait()


def engine_bench(args: argparse.Namespace, report: benchkit.Report) -> None:
    roots = {"": benchkit.ROOT}
    if args.root:
        roots["before "] = Path(args.root).resolve()
    with tempfile.TemporaryDirectory(prefix="bench-idle-engine-") as tmp:
        paths = [Path(tmp) / f"rank-{r}.node{r % HOSTS}.log" for r in range(args.files)]
        for p in paths:
            p.write_bytes(b"a line\n")
        arms = {f"{label}{m}": (lambda root=root, m=m: {"pct": engine_arm(root, m, paths, args.idle)})
                for label, root in roots.items() for m in ("inotify", "polling")}
        got = benchkit.alternated(arms, args.rounds, warmup=0)
    print(f"the tail engine: {args.files:,} quiet files, {args.idle:g} s idle, {args.rounds} rounds alternated; "
          + ", ".join(f"{label or 'this checkout '}{root}" for label, root in roots.items())
          + f"; load {report.load_before} -> {benchkit.load()}")
    for name, runs in got.items():
        values = [r["pct"] for r in runs]
        med = benchkit.median(values)
        print(f"  {name:16} idle {', '.join(f'{v:.2f}' for v in values)}: {benchkit.spread(values, '{:.2f}')} % of a "
              "core; " + report.goal(f"engine {name} idle", f"<= {GOAL_IDLE_PCT:g}% of a core", round(med, 3),
                                     med <= GOAL_IDLE_PCT))
        report.figure(f"engine {name}", {"idle_pct": [round(v, 3) for v in values]})


def pct(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(round(q * (len(sorted_values) - 1))))]


def summarize(rounds: list[dict], report: benchkit.Report) -> None:
    names = list(rounds[0]["idle_pct"])
    print(f"{'round':6} {'load idle/busy':>15}  " + "  ".join(f"{n + ' idle %':>14} {'p50/p99/max ms':>18}"
                                                             for n in names))
    for i, r in enumerate(rounds):
        lat = r["latency_ms"]
        print(f"{i:<6} {r['load_idle']:>7}/{r['load_busy']:<7}  " + "  ".join(
            f"{r['idle_pct'][n]:14.2f} {pct(lat[n], .5):6.0f}/{pct(lat[n], .99):4.0f}/{lat[n][-1]:<6.0f}"
            for n in names))
    for n in names:
        idle = [r["idle_pct"][n] for r in rounds]
        p50 = [pct(r["latency_ms"][n], .5) for r in rounds]
        p99 = [pct(r["latency_ms"][n], .99) for r in rounds]
        print(f"{n:8}: idle {benchkit.spread(idle, '{:.2f}')} % of a core; latency under load p50 "
              f"{benchkit.spread(p50, '{:.0f}')} ms, p99 {benchkit.spread(p99, '{:.0f}')} ms")
        report.figure(n, {"idle_pct": [round(x, 3) for x in idle], "idle_pct_median": round(benchkit.median(idle), 3),
                          "latency_p50_ms": [round(x, 1) for x in p50], "latency_p99_ms": [round(x, 1) for x in p99]})
    idle = benchkit.median(r["idle_pct"]["logs -f"] for r in rounds)
    p99 = benchkit.median(pct(r["latency_ms"][NO_FOLD], .99) for r in rounds)
    print(f"logs -f idle {idle:.2f} % of a core: "
          + report.goal("logs -f idle", f"<= {GOAL_IDLE_PCT:g}% of a core", round(idle, 3), idle <= GOAL_IDLE_PCT))
    before = "not yet recorded" if LATENCY_BEFORE_MS is None else f"{LATENCY_BEFORE_MS:g} ms"
    print(f"{NO_FOLD} latency p99 under load {p99:.0f} ms: "
          + report.goal("logs -f latency p99", f"<= the p99 before issue 29 ({before})", round(p99, 1),
                        None if LATENCY_BEFORE_MS is None else p99 <= LATENCY_BEFORE_MS))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1024, help="quiet rank files of the run")
    ap.add_argument("--idle", type=float, default=20.0, help="seconds of the idle window")
    ap.add_argument("--lines", type=int, default=40, help="new lines timed under load per round")
    ap.add_argument("--load", type=int, default=2, help="busy processes during the latency phase")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", metavar="PATH", help="write the figures and goals as JSON (- for stdout)")
    ap.add_argument("--smoke", action="store_true", help="16 files, 1 s idle, 3 lines (the suite's smoke test)")
    ap.add_argument("--engine", action="store_true", help="the tail engine alone: inotify vs polling only")
    ap.add_argument("--root", metavar="DIR", help="--engine: also this checkout's engine (the before), alternated")
    args = ap.parse_args()
    if args.engine:
        report = benchkit.Report("idle-engine")
        engine_bench(args, report)
        report.dump(args.json)
        return 0
    if args.smoke:
        args.files, args.idle, args.lines, args.load, args.rounds = 16, 1.0, 3, 0, 1
    if not shutil.which("tail"):
        sys.exit("tail is not on PATH (coreutils)")
    report = benchkit.Report("idle")
    print(f"{args.files:,} quiet rank files, {args.idle:g} s idle, {args.lines} lines under {args.load} busy "
          f"processes, {args.rounds} round(s); {os.cpu_count()} cores")
    rounds = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="bench-idle-") as tmp:
            rounds.append(one_round(args, Path(tmp)))
    summarize(rounds, report)
    report.dump(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
