"""Cold start of cockpit's light commands against `torchrun --help`, side by side.

    python tests/bench/bench_startup.py [--runs 9] [--smoke]

Runs are alternated (cockpit, torchrun, cockpit, ...) so machine noise hits both alike; prints medians
and ratios. Targets (issue: foundation): cockpit <= 0.15 s here and <= 0.1x torchrun.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--smoke", action="store_true", help="one run each (the test suite's smoke test)")
    args = parser.parse_args()
    runs = 1 if args.smoke else args.runs
    cockpit = shutil.which("cockpit") or sys.exit("cockpit is not on PATH: pip install -e . first")
    torchrun = shutil.which("torchrun") or sys.exit("torchrun is not on PATH: pip install torch first")
    commands = {"cockpit --help": [cockpit, "--help"],
                "cockpit render jobs/demo.yaml": [cockpit, "render", "jobs/demo.yaml"],
                "cockpit validate jobs/*.yaml": [cockpit, "validate", *map(str, sorted(REPO.glob("jobs/*.yaml")))],
                "torchrun --help": [torchrun, "--help"]}
    for cmd in commands.values():
        wall(cmd)  # warm the page cache: "cold" here means a fresh interpreter, not a cold disk
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, cmd in commands.items():
            times[name].append(wall(cmd))
    base = statistics.median(times["torchrun --help"])
    print(f"{'command':34} {'median s':>9} {'min s':>7} {'x torchrun':>11}   ({runs} runs each, alternated)")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:34} {med:9.3f} {min(ts):7.3f} {med / base:11.3f}")


if __name__ == "__main__":
    main()
