"""`cockpit plot` on a long, wide run against the least any reader of the same files does, side by side.

    python tests/bench/bench_plot.py [--ranks 64] [--steps 20000] [--runs 5] [--smoke]

The run directory is generated: RANKS metrics files of STEPS records each (cockpit.train's format), plus a
beat file per rank (one line a second, as the rank hook writes). Measured, each in a fresh process as a user
runs it, alternated so machine noise hits all alike:

- cockpit plot RUN (loss, the default), --metric heat, --metric wait: wall seconds and peak RSS;
- the anchor: a bare Python loop that opens every metrics file and json-decodes every line, keeping nothing
  (what any chart of these files must at least do).

Prints per command the median and spread (min-max) of wall time, the ratio to the anchor, and the peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ANCHOR = """
import json, sys
from pathlib import Path
for p in sorted(Path(sys.argv[1], "metrics").iterdir()):
    with open(p, "rb") as f:
        for line in f:
            json.loads(line)
"""


def make_run(root: Path, ranks: int, steps: int) -> Path:
    run = root / "bench-plot-run"
    (run / "metrics").mkdir(parents=True)
    (run / "logs").mkdir()
    status = json.loads((REPO / "tests/fixtures/runs/demo-20261125-153404-493f/status.json").read_text())
    status["run_id"] = run.name
    (run / "status.json").write_text(json.dumps(status))
    rng = random.Random(7)
    t0 = 1_700_000_000.0
    for r in range(ranks):
        slow = 1.5 if r == ranks // 3 else 1.0
        lines, t = [], t0
        for s in range(steps):
            t += 0.05 * slow
            lines.append(json.dumps({"step": s, "epoch": s // 1000, "loss": 2.0 / (1 + s / 500) + rng.random() * 0.01,
                                     "samples_per_s": 1280.0 / slow, "time": round(t, 3), "rank": r}))
        (run / "metrics" / f"rank-{r}.jsonl").write_text("\n".join(lines) + "\n")
        beats, sync = [], 0.0
        for i in range(int(steps * 0.05) + 1):
            sync += 0.05 if r == ranks // 3 else 0.4
            beats.append(json.dumps({"t": t0 + i, "pid": 1, "sync": round(sync, 3), "n": i * 20, "in": None}))
        (run / "logs" / f"rank-{r}.node{r // 8}.beat").write_text("\n".join(beats[-4000:]) + "\n")
    return run


def measure(cmd: list[str], env: dict) -> float:
    """Wall seconds of one child process."""
    start = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def rss_of(cmd: list[str], env: dict) -> float:
    """Peak RSS (MiB) of one run of ``cmd``, measured by a wrapper process of its own."""
    probe = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
             "stderr=subprocess.DEVNULL, check=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe, *cmd], cwd=REPO, env=env, capture_output=True, text=True,
                         check=True)
    return int(out.stdout.strip()) / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="8 ranks x 2,000 steps, one run each")
    args = parser.parse_args()
    ranks, steps, runs = (8, 2000, 1) if args.smoke else (args.ranks, args.steps, args.runs)
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with tempfile.TemporaryDirectory() as tmp:
        run = make_run(Path(tmp), ranks, steps)
        size = sum(p.stat().st_size for p in (run / "metrics").iterdir()) / 2**20
        plot = [sys.executable, "-m", "cockpit", "plot", str(run), "--width", "120", "--height", "30"]
        commands = {"anchor: bare json loop": [sys.executable, "-c", ANCHOR, str(run)],
                    "cockpit plot (loss)": plot,
                    "cockpit plot --metric heat": [*plot, "--metric", "heat"],
                    "cockpit plot --metric wait": [*plot, "--metric", "wait"]}
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, cmd in commands.items():
                times[name].append(measure(cmd, env))
        rss = {name: rss_of(cmd, env) for name, cmd in commands.items()}
    base = statistics.median(times["anchor: bare json loop"])
    load = os.getloadavg()[0]
    print(f"{ranks} ranks x {steps} steps ({size:.0f} MiB of metrics), {runs} runs each, alternated; load {load:.2f}")
    print(f"{'command':28} {'median s':>9} {'min-max s':>13} {'x anchor':>9} {'peak RSS MiB':>13}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:28} {med:9.2f} {min(ts):6.2f}-{max(ts):<6.2f} {med / base:9.2f} {rss[name]:13.0f}")


if __name__ == "__main__":
    main()
