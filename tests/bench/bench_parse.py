"""Parser throughput on the NCCL corpus concatenated to >= 2M lines, next to `grep -c NCCL` on the same file.

    python tests/bench/bench_parse.py [--lines 2000000] [--runs 3]

Not collected by pytest (tests/bench is in norecursedirs). Prints the median of --runs for each side: the
parser end to end (read, decode, parse: what `cockpit diagnose` does per file) and parse only (lines
already in memory), and the ratio to grep.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from cockpit.logs.parse import parse_lines  # noqa: E402
from cockpit.logs.report import read_lines  # noqa: E402

CORPUS = ROOT / "tests" / "fixtures" / "nccl"


def build(path: Path, min_lines: int) -> tuple[int, int]:
    """Concatenate the corpus (each file ending in a newline) until ``min_lines``: (lines, copies)."""
    chunk = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in sorted(CORPUS.glob("*.log")))
    per_copy = chunk.count(b"\n")
    copies = -(-min_lines // per_copy)
    with path.open("wb") as f:
        for _ in range(copies):
            f.write(chunk)
    return per_copy * copies, copies


def timed(fn, runs: int) -> tuple[float, float, object]:
    """Median wall and CPU seconds of ``runs`` calls (CPU time shows the cost without other load)."""
    wall, cpu, result = [], [], None
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "corpus.log"
        n, copies = build(path, args.lines)
        print(f"file: {n:,} lines, {path.stat().st_size / 1e6:.0f} MB (the {len(list(CORPUS.glob('*.log')))}-file "
              f"corpus x {copies})")

        grep = shutil.which("grep")
        if grep:
            t_grep, _, out = timed(lambda: subprocess.run([grep, "-c", "NCCL", str(path)], capture_output=True,
                                                          text=True, check=False).stdout.strip(), args.runs)
            print(f"grep -c NCCL        : {t_grep:7.3f} s wall  {n / t_grep / 1e6:8.2f} M lines/s  (count {out})")

        t_e2e, c_e2e, events = timed(lambda: parse_lines(read_lines(path)), args.runs)
        print(f"parse (read+parse)  : {t_e2e:7.3f} s wall  {n / t_e2e / 1e3:8.0f} k lines/s  "
              f"({n / c_e2e / 1e3:.0f} k lines/s CPU; {len(events):,} events)")
        lines = list(read_lines(path))
        t_mem, c_mem, _ = timed(lambda: parse_lines(lines), args.runs)
        print(f"parse (in memory)   : {t_mem:7.3f} s wall  {n / t_mem / 1e3:8.0f} k lines/s  "
              f"({n / c_mem / 1e3:.0f} k lines/s CPU)")
        if grep:
            print(f"ratio parse/grep    : {t_e2e / t_grep:7.0f} x slower end to end (wall)")


if __name__ == "__main__":
    main()
