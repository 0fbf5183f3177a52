"""`cockpit diagnose` on an error-dense log (a crash-looping job) beside a bare `for line in f` loop: lines/s,
the ratio to the loop and the peak RSS of the process, at growing sizes (issue 29, row 2).

    python tests/bench/bench_dense.py [--lines 100000 400000 1600000] [--runs 5] [--json PATH|-] [--smoke]
                                      [--profile [LINES]]

The input is the project's own corpus: every ``*.log`` of tests/fixtures/nccl, nccl2 and nccl3 (real NCCL,
torch, torchrun and Slurm failure excerpts; each ending in a newline) concatenated in name order and repeated
until the size is reached, so nearly every line is one a rule matches: what the log of a job that fails,
restarts and fails again for hours looks like. Files are cached under /tmp (keyed by the corpus' content).

Each run is a fresh child process, run by run alternated with the anchor (the order reversed every other run):

  loop       ``python bench_dense.py --child loop FILE``: ``for line in open(FILE): pass`` (read, decode, split)
  diagnose   ``python bench_dense.py --child diagnose FILE``: cockpit's own ``main(["diagnose", FILE])`` (the
             CLI, output to /dev/null) in that process

Children run with Python's bytecode cache on (``benchkit.with_bytecode``: an installed cockpit is compiled; the
fixed-cost runs, first, write the cache), so that no cockpit module deferred into main() is compiled from
source inside the timed work. Each child times its own work (process CPU seconds around the loop or main(),
after its imports) and the bench
measures the whole process from outside (wall, and peak RSS from wait4: imports included). Printed per size:
lines/s of the work (CPU) median [min-max], the ratio of the medians diagnose/loop, the net rate (the work less
diagnose's fixed cost, measured first on a 3-line file: deferred imports, the scanner's database), the whole
process' wall seconds, the peak RSS of each, the 1-minute load; then the RSS growth per line between the
smallest and largest size, and issue 29's goals
(>= 1 M lines/s net at every size, peak RSS <= 64 MB at any size). ``--profile``: then one run of `cockpit
diagnose` under cProfile on LINES lines (default 400,000): its top functions by own and cumulative time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit  # noqa: E402

CORPORA = ("nccl", "nccl2", "nccl3")
GOAL_LINES_PER_S = 1_000_000
GOAL_RSS_MB = 64.0


def corpus_chunk() -> bytes:
    """Every corpus log once, each ending in a newline, in path order."""
    fixtures = benchkit.ROOT / "tests" / "fixtures"
    paths = sorted(p for c in CORPORA for p in (fixtures / c).rglob("*.log"))
    if not paths:
        sys.exit(f"no corpus logs under {fixtures}/{{{','.join(CORPORA)}}}")
    return b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in paths)


def dense_log(lines: int) -> tuple[Path, int]:
    """The corpus repeated to at least ``lines`` lines, cached under /tmp; (path, its line count)."""
    chunk = corpus_chunk()
    copies = -(-lines // chunk.count(b"\n"))
    key = hashlib.sha256(chunk).hexdigest()[:12]
    path = Path(f"/tmp/cockpit-bench-dense-{key}-{copies}.log")
    if not path.exists() or path.stat().st_size != len(chunk) * copies:
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        with open(tmp, "wb") as f:
            for _ in range(copies):
                f.write(chunk)
        tmp.replace(path)
    return path, chunk.count(b"\n") * copies


def child(kind: str, path: str, result: str) -> int:
    """In the child process: time the work, write {"cpu", "wall"} to ``result``."""
    if kind == "diagnose":
        from cockpit.cli.main import main as cockpit_main

        def work() -> None:
            saved = os.dup(1)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the report goes nowhere, as with > /dev/null
            try:
                code = cockpit_main(["diagnose", path])
                sys.stdout.flush()
            finally:
                os.dup2(saved, 1)
            if code not in (0, 1):  # 1: it found failures (it should, in this corpus)
                sys.exit(f"cockpit diagnose {path} exited {code}")
    else:
        def work() -> None:
            with open(path, encoding="utf-8", errors="replace") as f:
                for _line in f:
                    pass
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    Path(result).write_text(json.dumps({"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall}))
    return 0


def run_arm(kind: str, path: Path, result: Path) -> dict:
    proc = benchkit.run_child([sys.executable, __file__, "--child", kind, str(path), str(result)],
                              env=benchkit.with_bytecode(benchkit.cockpit_env()))  # compiled, as installed
    inner = json.loads(result.read_text())
    return {"cpu": inner["cpu"], "work_wall": inner["wall"], "process_wall": proc.wall, "rss": proc.peak_rss_mb}


def measure_size(lines: int, runs: int) -> dict:
    path, count = dense_log(lines)
    with open(path, "rb") as f:  # page cache; a block at a time (this process' RSS stays small)
        while f.read(1 << 20):
            pass
    result = path.with_suffix(f".result{os.getpid()}")
    load = benchkit.load()
    try:
        got = benchkit.alternated({k: (lambda k=k: run_arm(k, path, result)) for k in ("loop", "diagnose")},
                                  runs, warmup=0)
    finally:
        result.unlink(missing_ok=True)
    return {"lines": count, "bytes": path.stat().st_size, "load": [load, benchkit.load()], "runs": got}


def fixed_cost(runs: int) -> float:
    """CPU seconds of diagnose's work on a 3-line file (median): what main() costs whatever the input (its
    deferred imports, the scanner's database), taken off the work when the rate per line is judged."""
    path = Path(f"/tmp/cockpit-bench-dense-small-{os.getpid()}.log")
    path.write_bytes(b"".join(corpus_chunk().splitlines(keepends=True)[:3]))
    result = path.with_suffix(".result")
    try:
        return benchkit.median(run_arm("diagnose", path, result)["cpu"] for _ in range(max(3, runs)))
    finally:
        path.unlink()
        result.unlink(missing_ok=True)


def show(size: dict, report: benchkit.Report, fixed: float) -> dict:
    n, got = size["lines"], size["runs"]
    loop_cpu = benchkit.median(r["cpu"] for r in got["loop"])
    print(f"\n{n:,} lines, {size['bytes'] / 1e6:.0f} MB; load {size['load'][0]} -> {size['load'][1]}; "
          f"{len(got['loop'])} runs each, alternated")
    print(f"  {'arm':9} {'M lines/s (CPU) median [min-max]':>34} {'x loop':>7} {'net M lines/s':>14} "
          f"{'process s':>10} {'peak RSS MB [min-max]':>24}")
    fig = {"lines": n, "load": size["load"]}
    for arm, rs in got.items():
        cpu = [r["cpu"] for r in rs]
        rates = [n / c / 1e6 for c in cpu]
        ratio = benchkit.median(cpu) / loop_cpu
        rss = [r["rss"] for r in rs]
        net = n / max(benchkit.median(cpu) - (fixed if arm == "diagnose" else 0.0), 1e-9)
        print(f"  {arm:9} {benchkit.spread(rates, '{:.3f}'):>34} {ratio:7.1f} {net / 1e6:14.3f} "
              f"{benchkit.median(r['process_wall'] for r in rs):10.2f} {benchkit.spread(rss, '{:.0f}'):>24}")
        fig[arm] = {"lines_per_s": round(n / benchkit.median(cpu)), "lines_per_s_all": [round(x * 1e6) for x in rates],
                    "x_loop": round(ratio, 2), "net_lines_per_s": round(net),
                    "cpu_s": [round(c, 3) for c in cpu],
                    "process_wall_s": [round(r["process_wall"], 3) for r in rs],
                    "peak_rss_mb": round(max(rss), 1), "peak_rss_mb_all": [round(x, 1) for x in rss]}
    report.figure(f"{n}_lines", fig)
    return fig


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, nargs="+", default=[100_000, 400_000, 1_600_000])
    ap.add_argument("--runs", type=int, default=5, help="runs of each arm per size")
    ap.add_argument("--json", metavar="PATH", help="write the figures and goals as JSON (- for stdout)")
    ap.add_argument("--smoke", action="store_true", help="10k lines, one run (the test suite's smoke test)")
    ap.add_argument("--profile", type=int, nargs="?", const=400_000, metavar="LINES",
                    help="then cProfile one diagnose of LINES lines (default 400,000)")
    ap.add_argument("--child", nargs=3, metavar=("KIND", "FILE", "RESULT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(*args.child)
    if args.smoke:
        args.lines, args.runs = [10_000], 1
    report = benchkit.Report("dense")
    print(f"diagnose of the corpus ({', '.join(CORPORA)}) repeated; {os.cpu_count()} cores, "
          f"Python {sys.version.split()[0]}")
    fixed = fixed_cost(args.runs)
    report.figure("fixed_cpu_s", round(fixed, 4))
    print(f"fixed cost of diagnose's work (a 3-line file): {fixed * 1000:.0f} ms CPU; the net rate leaves it out")
    figs = [show(measure_size(lines, args.runs), report, fixed) for lines in sorted(args.lines)]
    slowest = min(f["diagnose"]["net_lines_per_s"] for f in figs)
    fattest = max(f["diagnose"]["peak_rss_mb"] for f in figs)
    if len(figs) > 1:
        grow = (figs[-1]["diagnose"]["peak_rss_mb"] - figs[0]["diagnose"]["peak_rss_mb"]) * 1024 / \
               (figs[-1]["lines"] - figs[0]["lines"])
        report.figure("rss_growth_kb_per_line", round(grow, 4))
        print(f"\npeak RSS growth of diagnose: {grow:.3f} KB per line ({figs[0]['lines']:,} -> {figs[-1]['lines']:,})")
    print(f"diagnose, slowest size: {slowest / 1e6:.3f} M lines/s net; "
          + report.goal("lines/s", f">= {GOAL_LINES_PER_S / 1e6:g} M lines/s (net) at every size", slowest,
                        slowest >= GOAL_LINES_PER_S))
    print(f"diagnose, largest peak RSS: {fattest:.0f} MB; "
          + report.goal("peak RSS", f"<= {GOAL_RSS_MB:g} MB at any size", fattest, fattest <= GOAL_RSS_MB))
    report.dump(args.json)
    if args.profile:
        path, n = dense_log(args.profile)
        print(f"\ncProfile of cockpit diagnose, {n:,} lines:")
        print(benchkit.cprofile_top(["diagnose", str(path)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
