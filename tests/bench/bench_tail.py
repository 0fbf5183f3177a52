"""Benchmark the tail engine: N writer processes x R lines/s each for S seconds, one Tailer consuming.

    python tests/bench/bench_tail.py [--writers 64 --rate 1000 --seconds 20 --tick-ms 5] [--smoke]

Each writer is paced: it sleeps to its schedule (waking every --tick-ms), writes the lines due by then, each
stamped with time.time() as it is written, and stops after --seconds (hard bound: --seconds + 5). The
consumer (this process) records write -> delivery delay for every line, checks per-source order, and reports
p50 / p99 / max latency and its own CPU use (user + sys over wall time, % of one core), which includes the
benchmark's own per-line bookkeeping. Not collected by pytest (tests/bench is in norecursedirs).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

from cockpit.logs.tail import Tailer

# The writer runs as `python -S -c WRITER` (no site, no cockpit import): 64 of them must start fast on a small
# machine. It says "ready", waits for the common start time t0 on stdin, then follows its schedule.
WRITER = r"""
import sys, time
path, rank, rate, seconds, tick, nice = sys.argv[1:7]
rank, rate, seconds, tick = int(rank), float(rate), float(seconds), float(tick)
if int(nice):
    import os
    os.nice(int(nice))
pad = "loss=2.3456 lr=3.0e-04 grad_norm=1.234 tok/s=123456"
total, i, worst = int(rate * seconds), 0, 0.0
with open(path, "a", encoding="utf-8") as f:
    print("ready", flush=True)
    t0 = float(sys.stdin.readline())
    time.sleep(max(0.0, t0 - time.time()))
    while i < total:
        now = time.time()
        if now > t0 + seconds + 5:  # hard bound if the machine cannot keep up
            break
        due = min(total, int((now - t0) * rate) + 1)
        worst = max(worst, now - (t0 + i / rate))
        while i < due:
            f.write(f"{i} {time.time():.6f} rank={rank} step={i} {pad}\n")
            i += 1
        f.flush()
        time.sleep(max(tick, t0 + i / rate - time.time()))
print(i, round(worst, 4), flush=True)
"""


async def consume(tailer: Tailer, procs: list[subprocess.Popen[str]]) -> dict[str, object]:
    """Take batches until the writers are done and stop() has drained everything."""
    latencies, read_lags = array("d"), array("d")
    next_number: dict[object, int] = {}
    bad_order = batches = 0
    bookkeeping = 0.0  # CPU seconds spent on this benchmark's own per-line checks

    async def stop_when_writers_exit() -> None:
        while any(p.poll() is None for p in procs):
            await asyncio.sleep(0.1)
        tailer.stop()

    stopper = asyncio.create_task(stop_when_writers_exit())
    async for batch in tailer:
        now, cpu0 = time.time(), time.process_time()
        batches += 1
        for line in batch.lines:
            number, stamp, _ = line.text.split(" ", 2)
            latencies.append(now - float(stamp))
            read_lags.append(line.t_read - float(stamp))
            if int(number) != next_number.get(line.source, 0):
                bad_order += 1
            next_number[line.source] = int(number) + 1
        bookkeeping += time.process_time() - cpu0
    await stopper
    return {"latencies": latencies, "read_lags": read_lags, "bad_order": bad_order, "batches": batches,
            "bookkeeping": bookkeeping}


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, default=64)
    ap.add_argument("--rate", type=float, default=1000.0, help="lines per second per writer")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--tick-ms", type=float, default=5.0, help="writer wake-up period")
    ap.add_argument("--poll-ms", type=float, default=10.0, help="Tailer poll_interval")
    ap.add_argument("--window-ms", type=float, default=25.0, help="Tailer batch_window")
    ap.add_argument("--writer-nice", type=int, default=0,
                    help="niceness of the writers (they stand in for processes on other machines)")
    ap.add_argument("--smoke", action="store_true", help="4 writers for 1 s (the test suite's smoke test)")
    args = ap.parse_args()
    if args.smoke:
        args.writers, args.rate, args.seconds = 4, 200.0, 1.0
    with tempfile.TemporaryDirectory(prefix="bench_tail_") as tmp:
        run(args, Path(tmp))


def run(args: argparse.Namespace, tmp: Path) -> None:
    tailer = Tailer(poll_interval=args.poll_ms / 1000, batch_window=args.window_ms / 1000)
    paths = [tmp / f"rank{r}.log" for r in range(args.writers)]
    for r, path in enumerate(paths):
        tailer.add(("localhost", r), path)
    procs = [subprocess.Popen([sys.executable, "-S", "-c", WRITER, str(path), str(r), str(args.rate),
                               str(args.seconds), str(args.tick_ms / 1000), str(args.writer_nice)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for r, path in enumerate(paths)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    t0 = time.time() + 0.2
    for p in procs:
        p.stdin.write(f"{t0!r}\n")
        p.stdin.close()
    time.sleep(max(0.0, t0 - time.time()))
    cpu0, wall0 = time.process_time(), time.monotonic()
    result = asyncio.run(consume(tailer, procs))
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    written = [p.stdout.read().split() for p in procs]
    for p in procs:
        p.wait()
    report(args, result, cpu, wall, written)


def report(args, result, cpu: float, wall: float, written: list[list[str]]) -> None:
    lat = sorted(result["latencies"])
    expected = sum(int(w[0]) for w in written)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"writers={args.writers} rate={args.rate:g}/s seconds={args.seconds:g} tick={args.tick_ms:g}ms "
          f"poll={args.poll_ms:g}ms window={args.window_ms:g}ms writer-nice={args.writer_nice} cpus={os.cpu_count()}")
    print(f"lines: written={expected} delivered={len(lat)} out_of_order={result['bad_order']} "
          f"batches={result['batches']} ({result['batches'] / wall:.1f}/s)")
    for name, values in (("write->delivery", lat), ("write->read", sorted(result["read_lags"]))):
        print(f"latency {name} ms: p50={1000 * percentile(values, 0.50):.1f} "
              f"p99={1000 * percentile(values, 0.99):.1f} max={1000 * values[-1]:.1f}")
    print(f"consumer cpu: {100 * cpu / wall:.1f}% of one core ({cpu:.2f}s over {wall:.2f}s wall); "
          f"without the benchmark's per-line checks: {100 * (cpu - result['bookkeeping']) / wall:.1f}%")
    print(f"writers: worst lag behind schedule {max(float(w[1]) for w in written) * 1000:.1f} ms; "
          f"their cpu {children.ru_utime + children.ru_stime:.1f}s in all")


if __name__ == "__main__":
    main()
