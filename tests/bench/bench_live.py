"""Benchmark: the live path as a user sees it — `cockpit logs RUN -f` beside `tail -F` on the same files in
the same run (not collected by pytest).

    python tests/bench/bench_live.py                     # 64 ranks x 1,000 lines/s for 20 s
    python tests/bench/bench_live.py --ranks 64 --rate 250 --seconds 15
    python tests/bench/bench_live.py --smoke              # 8 ranks x 100 lines/s for 2 s

A writer process appends stamped lines (`<time.time()> rank=R seq=N ...`) to one log per rank of a run
directory whose status says running (its supervisor: this bench process). Both readers start before the
first line; each line's latency is (when the reader's line reached this process) − (its stamp). At the end
the status turns final, cockpit prints its summary and exits, tail is stopped. Reported per reader: lines
seen of lines written, p50 / p99 / max latency; and cockpit's p99 over tail's (target: ≤ max(100 ms, 1.5×
tail -F's p99), every line shown).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from cockpit.launch import procs  # noqa: E402
from cockpit.run.store import RunStatus, create_run_dir, write_status  # noqa: E402

WRITER = r"""
import os, sys, time
logs, ranks, rate, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
files = [open(os.path.join(logs, f"rank-{r}.bench.log"), "a", buffering=1 << 16) for r in range(ranks)]
tick, n, start = 0.01, 0, time.time()
per_tick = ranks * rate * tick
owed = 0.0
while time.time() - start < seconds:
    owed += per_tick
    while owed >= 1:
        r = n % ranks
        files[r].write(f"{time.time():.6f} rank={r} seq={n // ranks} loss=0.123456 step_time=0.0123 lr=1e-4\n")
        n, owed = n + 1, owed - 1
    for f in files:
        f.flush()
    time.sleep(max(0.0, start + tick * (1 + int((time.time() - start) / tick)) - time.time()))
print(n)
"""


def reader(proc: subprocess.Popen, out: list[float], counts: list[int]) -> None:
    for raw in proc.stdout:
        now = time.time()
        text = raw.decode(errors="replace")
        stamp = text.split("] ", 1)[-1].split(" ", 1)[0] if "] " in text else text.split(" ", 1)[0]
        try:
            out.append(now - float(stamp))
        except ValueError:
            continue
        counts[0] += 1


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--rate", type=float, default=1000.0, help="lines per second per rank")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--smoke", action="store_true", help="8 ranks x 100 lines/s for 2 s")
    a = p.parse_args()
    if a.smoke:
        a.ranks, a.rate, a.seconds = 8, 100.0, 2.0
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        run_dir = create_run_dir(runs, "bench-live")
        status = RunStatus(run_id="bench-live", name="bench", launcher="local", job_file="-", hosts=["bench"],
                           world_size=a.ranks, state="running", started=time.time(),
                           supervisor={"pid": os.getpid(), "start": procs.start_time(os.getpid())})
        write_status(run_dir, status)
        logs = run_dir / "logs"
        paths = [str(logs / f"rank-{r}.bench.log") for r in range(a.ranks)]
        for path in paths:
            Path(path).touch()
        env = {**os.environ, "COCKPIT_RUNS_DIR": str(runs), "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
        cockpit = subprocess.Popen([sys.executable, "-m", "cockpit", "logs", "bench-live", "-f"], cwd=REPO, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        tail = subprocess.Popen(["tail", "-q", "-n", "+1", "-F", *paths], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        lat = {"cockpit logs -f": [], "tail -F": []}
        counts = {k: [0] for k in lat}
        threads = [threading.Thread(target=reader, args=(proc, lat[k], counts[k]), daemon=True)
                   for proc, k in ((cockpit, "cockpit logs -f"), (tail, "tail -F"))]
        for t in threads:
            t.start()
        time.sleep(1.0)  # both readers are up before the first line
        began = time.monotonic()
        writer = subprocess.run([sys.executable, "-c", WRITER, str(logs), str(a.ranks), str(a.rate), str(a.seconds)],
                                capture_output=True, text=True, check=True)
        written = int(writer.stdout.strip())
        deadline = time.monotonic() + 60 + a.seconds
        while counts["tail -F"][0] < written and time.monotonic() < deadline:
            time.sleep(0.1)
        status.state, status.ended, status.exit_code = "succeeded", time.time(), 0
        write_status(run_dir, status)
        cockpit.wait(timeout=60 + a.seconds)
        tail.terminate()
        for t in threads:
            t.join(timeout=10)
        took = time.monotonic() - began
    print(f"{a.ranks} ranks x {a.rate:.0f} lines/s for {a.seconds:.0f} s: {written} lines written ({took:.1f} s)")
    for name, values in lat.items():
        ms = [1000 * v for v in values]
        print(f"  {name:<16} {counts[name][0]:>8} lines seen  p50 {pct(ms, 0.5):7.1f} ms  p99 {pct(ms, 0.99):7.1f} ms"
              f"  max {max(ms, default=float('nan')):7.1f} ms")
    c99, t99 = pct(lat["cockpit logs -f"], 0.99), pct(lat["tail -F"], 0.99)
    target = max(0.100, 1.5 * t99)
    print(f"cockpit p99 / tail -F p99: {c99 / t99:.2f}x; target p99 <= {1000 * target:.0f} ms: "
          f"{'MET' if c99 <= target else 'MISSED'}; every line shown: "
          f"{'yes' if counts['cockpit logs -f'][0] == written else 'NO'}")
    if statistics.median(lat["cockpit logs -f"] or [0]) < 0:
        print("  (clock went backwards?)")


if __name__ == "__main__":
    main()
