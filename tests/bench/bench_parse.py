"""Parser throughput: `cockpit diagnose` of generated multi-rank logs and of the repeated corpus, beside a bare
Python loop over the same files.

    python tests/bench/bench_parse.py [--lines 100000 400000 1000000] [--ranks 8] [--nccl-share 0.2]
                                      [--runs 5] [--corpus-lines 400000] [--arms ARM...] [--json PATH|-]
                                      [--smoke]
    python tests/bench/bench_parse.py --lines 8000000 --corpus-lines 0 --arms "bare loop" diagnose stdlib
                                                     # issue 29, row 1: 8 rank logs of 8M lines in all

Per input, alternated run by run so machine noise hits every arm alike, CPU seconds (process time: the cost
without the other load on the machine) and wall seconds:

  bare loop   ``for line in open(f): pass`` over every file (read, decode, split: the floor of any parser)
  diagnose    ``report.diagnose_paths``: read in blocks, parse, summarise, find (what `cockpit diagnose` does);
              with hyperscan installed (cockpit[fast]) the block is scanned for trigger words in C
  stdlib      the same with the stdlib gate (``parse_blocks(..., scan=False)``): diagnose without the extra
  line path   ``parse_lines(read_lines(f))`` per file: the parser fed line by line (what a live tail pays)

Printed: median lines/s (CPU) with the spread (min-max over the runs), and each arm's ratio to the bare loop;
for each generated job, issue 29's goals for diagnose (>= 3 M lines/s and <= 3x the bare loop, CPU).
Inputs: ``tests/bench/genlogs.py`` rank logs (NCCL INFO blocks with NCCL's own prefixes, step lines, a few
warnings, a traceback, watchdog timeouts) at each ``--lines`` total, and the 79-file corpus concatenated to
``--corpus-lines`` (every line a hit for some rule: the parser's worst realistic case; bench_dense.py measures
that case against issue 29's goals, in a child process with its RSS). Generated jobs are cached under /tmp,
keyed by genlogs.py's source and the job's shape (an 8M-line job takes a minute to write). The 1-minute load
average is printed with each table: below 1.0 on this 2-core machine is quiet. ``--smoke`` runs a tiny
version (the test suite's smoke test). Not collected by pytest (tests/bench is in norecursedirs).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit  # noqa: E402
import genlogs  # noqa: E402

from cockpit.logs.diagnose.engine import diagnose  # noqa: E402
from cockpit.logs.diagnose.report import diagnose_paths, read_blocks, read_lines  # noqa: E402
from cockpit.logs.parse.parser import parse_blocks, parse_lines  # noqa: E402
from cockpit.logs.parse.scan import scanner  # noqa: E402

CORPUS = ROOT / "tests" / "fixtures" / "nccl"
GOAL_LINES_PER_S = 3_000_000  # issue 29: diagnose on ordinary output
GOAL_X_LOOP = 3.0


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


def cached_job(total: int, ranks: int) -> list[Path]:
    """genlogs.write_job's files for this shape, made once under /tmp (keyed by genlogs' source)."""
    key = hashlib.sha256(Path(genlogs.__file__).read_bytes() + f"{total} {ranks} {genlogs.NCCL_SHARE}".encode())
    where = Path(f"/tmp/cockpit-bench-parse-{key.hexdigest()[:12]}")
    if not (where / ".complete").exists():
        shutil.rmtree(where, ignore_errors=True)
        genlogs.write_job(where, total, ranks=ranks)
        (where / ".complete").touch()
    return sorted(where.glob("rank-*.log"))


def measure(paths: list[Path], runs: int, arms: list[str]) -> dict[str, tuple[list[float], list[float]]]:
    """CPU and wall seconds of every arm, ``runs`` times, the arms alternated run by run, the order reversed
    every other run (after one warm-up each)."""
    chosen = {name: ARMS[name] for name in arms}
    for arm in chosen.values():
        arm(paths)  # page cache, imports
    out: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in chosen}
    for i in range(runs):
        for name, arm in (chosen.items() if i % 2 == 0 else reversed(chosen.items())):
            wall, cpu = time.perf_counter(), time.process_time()
            arm(paths)
            out[name][0].append(time.process_time() - cpu)
            out[name][1].append(time.perf_counter() - wall)
    return out


def report(title: str, lines: int, size: int, results: dict[str, tuple[list[float], list[float]]],
           load: float) -> dict:
    print(f"\n{title}: {lines:,} lines, {size / 1e6:.0f} MB; load {load:.2f} -> {os.getloadavg()[0]:.2f}; "
          f"median of {len(results['bare loop'][0])} runs (min-max)")
    base = statistics.median(results["bare loop"][0])
    print(f"  {'arm':10} {'lines/s CPU':>12} {'(min-max)':>19} {'lines/s wall':>13}  {'x bare loop (CPU)':>17}")
    for name, (cpu, wall) in results.items():
        med = statistics.median(cpu)
        spread = f"{lines / max(cpu) / 1e3:,.0f}-{lines / min(cpu) / 1e3:,.0f} k"
        wall_rate = lines / statistics.median(wall) / 1e3
        print(f"  {name:10} {lines / med / 1e3:>10,.0f} k {spread:>19} {wall_rate:>11,.0f} k  {med / base:>16.1f}x")
    return {"lines": lines, "bytes": size, "load": [round(load, 2), round(os.getloadavg()[0], 2)],
            **{name: {"lines_per_s": round(lines / statistics.median(cpu)),
                      "lines_per_s_all": [round(lines / c) for c in cpu],
                      "x_bare_loop": round(statistics.median(cpu) / base, 2),
                      "wall_lines_per_s": round(lines / statistics.median(wall))}
               for name, (cpu, wall) in results.items()}}


def goals(fig: dict, out: benchkit.Report) -> None:
    """Issue 29's goals for diagnose on ordinary output, printed under the table."""
    rate, x = fig["diagnose"]["lines_per_s"], fig["diagnose"]["x_bare_loop"]
    n = fig["lines"]
    print(f"  diagnose {rate / 1e6:.2f} M lines/s (CPU): "
          + out.goal(f"diagnose lines/s, {n}", f">= {GOAL_LINES_PER_S / 1e6:g} M lines/s", rate,
                     rate >= GOAL_LINES_PER_S)
          + f"; {x:.1f}x the bare loop: "
          + out.goal(f"diagnose x loop, {n}", f"<= {GOAL_X_LOOP:g}x the bare loop", x, x <= GOAL_X_LOOP))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, nargs="*", default=[100_000, 400_000, 1_000_000],
                    help="total lines of each generated job (none: only the corpus)")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--nccl-share", type=float, default=genlogs.NCCL_SHARE,
                    help="share of NCCL INFO lines in the generated logs")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--corpus-lines", type=int, default=400_000, help="0: skip the corpus")
    ap.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS),
                    help="the arms to measure (the bare loop always)")
    ap.add_argument("--json", metavar="PATH", help="write the figures and goals as JSON (- for stdout)")
    ap.add_argument("--smoke", action="store_true", help="a tiny run: 20k generated lines, 20k corpus lines, 1 run")
    args = ap.parse_args()
    arms = ["bare loop", *(a for a in args.arms if a != "bare loop")]
    out = benchkit.Report("parse")
    if args.smoke:
        args.lines, args.runs, args.corpus_lines = [20_000], 1, 20_000
    genlogs.NCCL_SHARE = args.nccl_share
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, "
          f"{'hyperscan' if scanner() is not None else 'no hyperscan: diagnose is the stdlib path'}")
    with tempfile.TemporaryDirectory(prefix="bench-parse-") as tmp:
        for total in args.lines:
            paths = cached_job(total, args.ranks)
            lines = sum(p.read_bytes().count(b"\n") for p in paths)
            size = sum(p.stat().st_size for p in paths)
            load = os.getloadavg()[0]
            fig = report(f"generated job, {args.ranks} rank files, {args.nccl_share:.0%} NCCL INFO", lines, size,
                         measure(paths, args.runs, arms), load)
            out.figure(f"generated_{lines}", fig)
            if "diagnose" in arms:
                goals(fig, out)
        if args.corpus_lines:
            path = Path(tmp) / "corpus.log"
            lines = build_corpus(path, args.corpus_lines)
            load = os.getloadavg()[0]
            out.figure(f"corpus_{lines}", report(f"the {len(list(CORPUS.glob('*.log')))}-file corpus, repeated",
                                                 lines, path.stat().st_size, measure([path], args.runs, arms), load))
    out.dump(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
