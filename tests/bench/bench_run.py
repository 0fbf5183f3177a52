"""Benchmark: `cockpit run` and `cockpit attach` as a user sees them, beside `tail -F` on the same rank log files
in the same run (not collected by pytest).

    python tests/bench/bench_run.py                         # 64 ranks x 250 lines/s for 15 s, 3 rounds
    python tests/bench/bench_run.py --ranks 32 --rate 500   # the same 16,000 lines/s from fewer processes
    python tests/bench/bench_run.py --smoke                  # 4 ranks x 100 lines/s for 2 s, one round

The job is real: a job file (local launcher, CPU, ``procs_per_node: RANKS``) whose script is a small stdlib
writer, started by cockpit through torchrun and its rank wrapper, so each rank's lines reach the log file
cockpit made for it. Each rank first prints one ``ready`` line and waits; once both readers have shown every
rank's ready line (both demonstrably follow every file) the bench creates the go file and the ranks write
RATE lines/s each for SECONDS, every line stamped with ``time.time_ns()`` just before its write.

Arms alternate round by round: ``run`` reads `cockpit run job.yaml`'s stdout; ``attach`` starts the run with
`cockpit run -q` (a terminal elsewhere: it still parses every line) and reads `cockpit attach RUN`'s stdout.
Beside either, in the same round, `tail -q -n +1 -F` on the same files, read by the same reader code (a thread
that notes ``time.time_ns()`` per line off the pipe). Latency = shown - written. Reported per round and as the
median [min-max] over rounds: p50, p99, max, the lines shown exactly once of those written (duplicates and
missing lines are counted), CPU seconds of the viewer and of tail; the goal from issue 15 is p99 <=
max(100 ms, 1.5x tail -F's p99) with every line shown.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

WRITER = r'''"""A rank of bench_run: one ready line, wait for the go file, then RATE stamped lines/s for SECONDS."""
import os, sys, time
go, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
rank = int(os.environ.get("RANK", "0"))
os.write(1, f"ready rank={rank}\n".encode())
given_up = time.monotonic() + 300  # a bench that failed before its go must not leave ranks behind
while not os.path.exists(go):
    if time.monotonic() > given_up:
        sys.exit("bench_run writer: no go file after 300 s")
    time.sleep(0.005)
tick, n = 0.01, 0
start = time.monotonic()
while (now := time.monotonic()) - start < seconds:
    due = int((now - start) * rate) + 1 - n  # lines owed by now
    if due > 0:  # one write per tick, each line stamped just before it
        stamp = time.time_ns()
        os.write(1, "".join(f"{stamp} rank={rank} seq={n + i} loss=0.123456 step_time=0.0123 lr=1e-4\n"
                            for i in range(due)).encode())
        n += due
    time.sleep(tick - (time.monotonic() - start) % tick)
os.write(1, f"done rank={rank} lines={n}\n".encode())
'''
STAMPED = re.compile(rb"(\d{19}) rank=(\d+) seq=(\d+) ")
DONE = re.compile(rb"done rank=(\d+) lines=(\d+)")


class Reader(threading.Thread):
    """Notes (time.time_ns(), raw line) for every line of a process's stdout; counts ready lines on the way."""

    def __init__(self, proc: subprocess.Popen):
        super().__init__(daemon=True)
        self.proc, self.got, self.ready = proc, [], 0

    def run(self) -> None:
        got, now = self.got, time.time_ns
        for raw in self.proc.stdout:
            got.append((now(), raw))
            if b"ready rank=" in raw:
                self.ready += 1


def wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"bench_run: waited {timeout:.0f} s for {what}")
        time.sleep(0.01)


def wait_cpu(proc: subprocess.Popen, timeout: float) -> float:
    """Wait for proc to end; its CPU seconds (user + system, from wait4)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            proc.kill()
            raise TimeoutError(f"bench_run: {proc.args} did not end within {timeout:.0f} s")
        time.sleep(0.02)


def score(got: list[tuple[int, bytes]], written: dict[int, int]) -> dict:
    """Latencies (ms) of the stamped lines, and how many were shown once, twice, or not at all."""
    lat, seen, dups = [], set(), 0
    for shown, raw in got:
        m = STAMPED.search(raw)
        if m is None:
            continue
        key = (int(m[2]), int(m[3]))
        dups += key in seen
        seen.add(key)
        lat.append((shown - int(m[1])) / 1e6)
    expected = sum(written.values())
    missing = sum(1 for r, n in written.items() for s in range(n) if (r, s) not in seen)
    lat.sort()
    pick = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]) if lat else (lambda q: float("nan"))
    return {"shown": len(seen), "written": expected, "dups": dups, "missing": missing,
            "p50": pick(0.5), "p99": pick(0.99), "max": lat[-1] if lat else float("nan")}


def start(arm: str, a, tmp: Path, i: int, err, procs: list) -> tuple[subprocess.Popen, subprocess.Popen, list]:
    """Start the run (and for the attach arm its viewer), then tail -F on its rank logs once they all exist.
    Returns (the owner, the viewer whose stdout is read, the rank logs); every process started goes into procs."""
    runs, go = tmp / f"runs-{i}", tmp / f"go-{i}"
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                                                     os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "cockpit", "run", str(tmp / "job.yaml"), "--runs-dir", str(runs),
           *(["-q"] if arm == "attach" else []), "--", str(go), str(a.rate), str(a.seconds)]
    procs.append(subprocess.Popen(cmd, cwd=tmp, env=env, stderr=err,
                                  stdout=subprocess.PIPE if arm == "run" else subprocess.DEVNULL))
    wait_for(lambda: len(list(runs.glob("*/logs/rank-*.log"))) >= a.ranks, 120, f"{a.ranks} rank log files")
    logs = sorted(runs.glob("*/logs/rank-*.log"))
    if arm == "attach":  # --from-start: the ready lines are there already; no stamped line is before the go
        procs.append(subprocess.Popen([sys.executable, "-m", "cockpit", "attach", logs[0].parents[1].name,
                                       "--from-start", "--runs-dir", str(runs)],
                                      cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=err))
    procs.append(subprocess.Popen(["tail", "-q", "-n", "+1", "-F", *map(str, logs)], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL))
    return procs[0], procs[-2], logs


def one_round(arm: str, a, tmp: Path, i: int) -> dict:
    """One run of the job with one cockpit viewer and tail -F beside it; each reader's score."""
    procs: list[subprocess.Popen] = []
    err_path = tmp / f"stderr-{i}.txt"
    try:
        with open(err_path, "w") as err:
            owner, viewer, logs = start(arm, a, tmp, i, err, procs)
            tail = procs[-1]
            readers = {arm: Reader(viewer), "tail -F": Reader(tail)}
            for r in readers.values():
                r.start()
            wait_for(lambda: all(r.ready >= a.ranks for r in readers.values()), 120,
                     "every rank's ready line in both readers")
            load = os.getloadavg()[0]
            (tmp / f"go-{i}").touch()
            cpu = {arm: wait_cpu(viewer, 120 + 4 * a.seconds)}
            if viewer is not owner:
                wait_cpu(owner, 60)
            written = {int(m[1]): int(m[2]) for log in logs for m in DONE.finditer(log.read_bytes())}
            if len(written) != a.ranks:
                raise RuntimeError(f"bench_run: {a.ranks - len(written)} rank(s) did not finish; see {logs[0].parent}")
            # tail -q shows exactly each file's lines: a ready line, the stamped lines, a done line per rank
            wait_for(lambda: len(readers["tail -F"].got) >= sum(written.values()) + 2 * a.ranks, 60,
                     "tail -F to show every line")
            tail.terminate()
            cpu["tail -F"] = wait_cpu(tail, 10)
            for r in readers.values():
                r.join(timeout=10)
    finally:
        for proc in procs:  # a failed round leaves nothing behind (the ranks give up waiting for their go)
            if proc.returncode is None and proc.poll() is None:
                proc.kill()
                proc.wait()
    out = {name: {**score(r.got, written), "cpu": cpu[name]} for name, r in readers.items()}
    out["load"] = load
    out["behind"] = [line for line in err_path.read_text().splitlines() if "behind" in line]
    return out


def spread(values: list[float], fmt: str = "{:.1f}") -> str:
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--rate", type=float, default=250.0, help="lines per second per rank")
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--rounds", type=int, default=3, help="rounds per arm (arms alternate)")
    p.add_argument("--arms", default="run,attach", help="comma-separated: run, attach")
    p.add_argument("--smoke", action="store_true", help="4 ranks x 100 lines/s for 2 s, one round per arm")
    a = p.parse_args(argv)
    if a.smoke:
        a.ranks, a.rate, a.seconds, a.rounds = 4, 100.0, 2.0, 1
    arms = a.arms.split(",")
    results: dict[str, list[dict]] = {arm: [] for arm in arms}
    print(f"{a.ranks} ranks x {a.rate:.0f} lines/s for {a.seconds:.0f} s ({a.ranks * a.rate:,.0f} lines/s), "
          f"{a.rounds} round(s) per arm; load before: {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-run-") as tmp:
        (Path(tmp) / "writer.py").write_text(WRITER)
        (Path(tmp) / "job.yaml").write_text(f"name: bench-run\nscript: writer.py\nlauncher: local\ngpus: none\n"
                                            f"procs_per_node: {a.ranks}\n")
        for i in range(a.rounds * len(arms)):
            arm = arms[i % len(arms)]
            res = one_round(arm, a, Path(tmp), i)
            results[arm].append(res)
            for name in (arm, "tail -F"):
                r = res[name]
                print(f"round {i // len(arms)} {name:<8} shown {r['shown']}/{r['written']} dup {r['dups']} "
                      f"missing {r['missing']}  p50 {r['p50']:6.1f} ms  p99 {r['p99']:6.1f} ms  max {r['max']:7.1f} ms"
                      f"  cpu {r['cpu']:.1f} s", flush=True)
            print(f"  load {res['load']:.2f}" + "".join(f"\n  {line}" for line in res["behind"][:3]), flush=True)
    lost = False
    for arm, rounds in results.items():
        ratio = [r[arm]["p99"] / r["tail -F"]["p99"] for r in rounds]
        met = [r[arm]["p99"] <= max(100.0, 1.5 * r["tail -F"]["p99"]) for r in rounds]
        every = all(r[arm]["shown"] == r[arm]["written"] and not r[arm]["dups"] for r in rounds)
        print(f"cockpit {arm}: p50 {spread([r[arm]['p50'] for r in rounds])} ms, p99 "
              f"{spread([r[arm]['p99'] for r in rounds])} ms; tail -F p50 "
              f"{spread([r['tail -F']['p50'] for r in rounds])} ms, p99 {spread([r['tail -F']['p99'] for r in rounds])}"
              f" ms; p99 ratio {spread(ratio, '{:.2f}')}x; goal p99 <= max(100 ms, 1.5x tail -F) met in "
              f"{sum(met)}/{len(met)} rounds; every line shown once: {'yes' if every else 'NO'}")
        lost = lost or not every
    print(f"load after: {os.getloadavg()[0]:.2f}")
    return 1 if lost else 0  # a line lost or shown twice is a bug, not a slow run


if __name__ == "__main__":
    sys.exit(main())
