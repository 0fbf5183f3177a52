"""Parser throughput: `cockpit diagnose` of generated multi-rank logs and of the repeated corpus, beside a bare
Python loop over the same files.

    python tests/bench/bench_parse.py [--lines 100000 400000 1000000] [--ranks 8] [--nccl-share 0.2]
                                      [--runs 5] [--corpus-lines 400000] [--smoke]

Per input, alternated run by run so machine noise hits every arm alike, CPU seconds (process time: the cost
without the other load on the machine) and wall seconds:

  bare loop   ``for line in open(f): pass`` over every file (read, decode, split: the floor of any parser)
  diagnose    ``report.diagnose_paths``: read in blocks, parse, summarise, find (what `cockpit diagnose` does);
              with hyperscan installed (cockpit[fast]) the block is scanned for trigger words in C
  stdlib      the same with the stdlib gate (``parse_blocks(..., scan=False)``): diagnose without the extra
  line path   ``parse_lines(read_lines(f))`` per file: the parser fed line by line (what a live tail pays)

Printed: median lines/s (CPU) with the spread (min-max over the runs), and each arm's ratio to the bare loop.
Inputs: ``tests/bench/genlogs.py`` rank logs (NCCL INFO blocks with NCCL's own prefixes, step lines, a few
warnings, a traceback, watchdog timeouts) at each ``--lines`` total, and the 79-file corpus concatenated to
``--corpus-lines`` (every line a hit for some rule: the parser's worst realistic case). The 1-minute load
average is printed with each table: below 1.0 on this 2-core machine is quiet. ``--smoke`` runs a tiny
version (the test suite's smoke test). Not collected by pytest (tests/bench is in norecursedirs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import genlogs  # noqa: E402

from cockpit.logs.diagnose.engine import diagnose  # noqa: E402
from cockpit.logs.diagnose.report import diagnose_paths, read_blocks, read_lines  # noqa: E402
from cockpit.logs.parse.parser import parse_blocks, parse_lines  # noqa: E402
from cockpit.logs.parse.scan import scanner  # noqa: E402

CORPUS = ROOT / "tests" / "fixtures" / "nccl"


def build_corpus(path: Path, min_lines: int) -> int:
    """Concatenate the corpus (each file ending in a newline) until ``min_lines``; returns the lines."""
    chunk = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in sorted(CORPUS.glob("*.log")))
    copies = -(-min_lines // chunk.count(b"\n"))
    path.write_bytes(chunk * copies)
    return chunk.count(b"\n") * copies


def bare(paths: list[Path]) -> None:
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for _line in f:
                pass


def stdlib(paths: list[Path]) -> None:
    diagnose([(os.fspath(p), parse_blocks(read_blocks(p), scan=False)) for p in paths])


def line_path(paths: list[Path]) -> None:
    for path in paths:
        parse_lines(read_lines(path))


ARMS: dict[str, Callable[[list[Path]], object]] = {"bare loop": bare, "diagnose": diagnose_paths,
                                                   "stdlib": stdlib, "line path": line_path}


def measure(paths: list[Path], runs: int) -> dict[str, tuple[list[float], list[float]]]:
    """CPU and wall seconds of every arm, ``runs`` times, the arms alternated (after one warm-up each)."""
    for arm in ARMS.values():
        arm(paths)  # page cache, imports
    out: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in ARMS}
    for _ in range(runs):
        for name, arm in ARMS.items():
            wall, cpu = time.perf_counter(), time.process_time()
            arm(paths)
            out[name][0].append(time.process_time() - cpu)
            out[name][1].append(time.perf_counter() - wall)
    return out


def report(title: str, lines: int, size: int, results: dict[str, tuple[list[float], list[float]]]) -> None:
    print(f"\n{title}: {lines:,} lines, {size / 1e6:.0f} MB; load {os.getloadavg()[0]:.2f}; "
          f"median of {len(results['bare loop'][0])} runs (min-max)")
    base = statistics.median(results["bare loop"][0])
    print(f"  {'arm':10} {'lines/s CPU':>12} {'(min-max)':>19} {'lines/s wall':>13}  {'x bare loop (CPU)':>17}")
    for name, (cpu, wall) in results.items():
        med = statistics.median(cpu)
        spread = f"{lines / max(cpu) / 1e3:,.0f}-{lines / min(cpu) / 1e3:,.0f} k"
        wall_rate = lines / statistics.median(wall) / 1e3
        print(f"  {name:10} {lines / med / 1e3:>10,.0f} k {spread:>19} {wall_rate:>11,.0f} k  {med / base:>16.1f}x")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, nargs="*", default=[100_000, 400_000, 1_000_000],
                    help="total lines of each generated job (none: only the corpus)")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--nccl-share", type=float, default=genlogs.NCCL_SHARE,
                    help="share of NCCL INFO lines in the generated logs")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--corpus-lines", type=int, default=400_000, help="0: skip the corpus")
    ap.add_argument("--smoke", action="store_true", help="a tiny run: 20k generated lines, 20k corpus lines, 1 run")
    args = ap.parse_args()
    if args.smoke:
        args.lines, args.runs, args.corpus_lines = [20_000], 1, 20_000
    genlogs.NCCL_SHARE = args.nccl_share
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, "
          f"{'hyperscan' if scanner() is not None else 'no hyperscan: diagnose is the stdlib path'}")
    with tempfile.TemporaryDirectory(prefix="bench-parse-") as tmp:
        for total in args.lines:
            paths = genlogs.write_job(Path(tmp) / f"job-{total}", total, ranks=args.ranks)
            lines = sum(p.read_bytes().count(b"\n") for p in paths)
            size = sum(p.stat().st_size for p in paths)
            report(f"generated job, {args.ranks} rank files, {args.nccl_share:.0%} NCCL INFO", lines, size,
                   measure(paths, args.runs))
        if args.corpus_lines:
            path = Path(tmp) / "corpus.log"
            lines = build_corpus(path, args.corpus_lines)
            report(f"the {len(list(CORPUS.glob('*.log')))}-file corpus, repeated", lines, path.stat().st_size,
                   measure([path], args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
