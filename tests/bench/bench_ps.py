"""`cockpit ps` over many runs beside a bare loop that json-loads every status.json (issue 29, rows 4 and 5).

    python tests/bench/bench_ps.py [--sizes 10 100 1000 5000] [--long 5000] [--runs 5] [--rebuild]
                                   [--json PATH|-] [--smoke] [--profile]

The runs are real ones, copied: the bench first runs the demo twice for real (`cockpit run jobs/demo.yaml`
on CPU): a short run (20 steps) and one with real-length metrics (1,000 steps: about 140 KB per rank, more
than the 64 KiB tail ps reads). Then for each size it makes that many run directories the way a launch
does (cockpit's own ``create_run_dir``: 0700, hook installed, commands/ and logs/), copies the template's
job.yaml, rank wrapper, commands, logs and metrics into each (not its 6.5 MB checkpoint), and writes each
run's status.json with cockpit's own ``write_status`` from the template's status (a new run id, times shifted
a minute per run); that also writes each run's summary.json, as a run's supervisor does (cockpit.run.summary),
and the listing checked before the timed runs adds each forecast to it, as the first `cockpit ps` after a run
ends does: the timed runs are the listings after that.
The runs directories are cached under /tmp, keyed by a version, the sizes and the source of the writers
(``--rebuild`` makes them again); the 5,000 long runs take a minute or two to make.

Per size, alternated run by run (the order reversed every other run), each a fresh process with cockpit's modules
compiled (benchkit.with_bytecode, written by the listing checked first), output to /dev/null:

  loop       ``python -c`` scanning the runs directory and ``json.load``-ing every status.json
  ps         ``cockpit ps --runs-dir DIR`` (the table)
  ps --json  ``cockpit ps --runs-dir DIR --json`` (every run's status and forecast)

Printed: wall ms median [min-max], each arm's ratio to the loop, peak RSS (wait4), the load; and issue 29's
goals: ps <= 2x the loop at every size, <= 300 ms at 5,000 runs, flat memory (ps --json's peak RSS at the
largest size within 1.25x of the smallest's). ``--profile``: then one `cockpit ps` of the largest runs
directory of each kind under cProfile: its top functions by own and cumulative time.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit  # noqa: E402

sys.path.insert(0, str(benchkit.ROOT))

from cockpit.run.store import RunStatus, create_run_dir, write_status  # noqa: E402

FIXTURE_VERSION = 2  # bump when what a copied run holds changes
CACHE = Path("/tmp/cockpit-bench-ps")
TEMPLATES = {"short": 20, "long": 1000}  # the demo's steps per template run
LOOP = ("import json, os, sys\n"
        "for e in os.scandir(sys.argv[1]):\n"
        "    if e.is_dir(follow_symlinks=False):\n"
        "        try:\n"
        "            with open(os.path.join(e.path, 'status.json'), 'rb') as f:\n"
        "                json.load(f)\n"
        "        except FileNotFoundError:\n"
        "            pass\n")
GOAL_X_LOOP = 2.0
GOAL_MS_AT_5000 = 300.0
GOAL_FLAT = 1.25
BASELINE: Path | None = None  # --baseline: another checkout's cockpit, an arm of its own (before / after in one run)


def writers_key() -> str:
    """A hash of the source files of the writers the copies are made with: a change there remakes them."""
    h = hashlib.sha256(f"v{FIXTURE_VERSION}".encode())
    for obj in (create_run_dir, write_status, RunStatus):
        h.update(Path(inspect.getsourcefile(obj)).read_bytes())
    return h.hexdigest()[:10]


def template(kind: str) -> Path:
    """A real demo run of ``TEMPLATES[kind]`` steps, made once per writers key."""
    runs = CACHE / f"template-{kind}-{writers_key()}"
    done = [d for d in runs.glob("demo-*") if (d / "status.json").exists()] if runs.is_dir() else []
    if done:
        return done[0]
    shutil.rmtree(runs, ignore_errors=True)
    runs.parent.mkdir(parents=True, exist_ok=True)
    print(f"making the {kind} template: cockpit run jobs/demo.yaml ({TEMPLATES[kind]} steps)", flush=True)
    benchkit.run_child(benchkit.cockpit_argv("run", str(benchkit.ROOT / "jobs" / "demo.yaml"), "-q", "--runs-dir",
                                             str(runs), "--", "--epochs", "1", "--steps-per-epoch",
                                             str(TEMPLATES[kind]), "--hidden", "64"),
                       env=benchkit.cockpit_env(), timeout=300)
    [run] = runs.glob("demo-*")
    status = json.loads((run / "status.json").read_text())
    if status["state"] != "succeeded":
        sys.exit(f"the template run {run} ended {status['state']}")
    return run


def copy_run(src: Path, runs: Path, i: int, base: dict) -> None:
    """Run ``i`` of a runs directory: a new run directory with the template's files and a status of its own."""
    created = base["created"] - 86400 * 30 + 60 * i
    run_id = f"demo-{time.strftime('%Y%m%d-%H%M%S', time.localtime(created))}-{i % 65536:04x}"
    run_dir = create_run_dir(runs, run_id)
    for sub in ("commands", "logs", "metrics"):
        (run_dir / sub).mkdir(mode=0o700, exist_ok=True)
        for f in (src / sub).iterdir():
            shutil.copyfile(f, run_dir / sub / f.name)
    for f in src.iterdir():  # job.yaml, the rank wrapper; status.json is written below
        if f.is_file() and f.name != "status.json":
            shutil.copyfile(f, run_dir / f.name)
    shift = created - base["created"]
    data = {**base, "run_id": run_id, "created": created}
    for key in ("started", "ended"):
        data[key] = base[key] + shift
    write_status(run_dir, RunStatus.from_dict(data))


def runs_dir(kind: str, size: int, rebuild: bool, prune: bool = True) -> Path:
    """``size`` copies of the ``kind`` template in a runs directory of their own (cached); ``prune``: remove
    the copies of other keys when making new ones (gigabytes: not in a smoke run)."""
    path = CACHE / f"runs-{kind}-{size}-{writers_key()}"
    marker = path / ".complete"
    if rebuild:
        shutil.rmtree(path, ignore_errors=True)
    if marker.exists():
        return path
    for old in CACHE.glob("*-*") if prune else ():  # copies by other writers or an older version of this bench
        if not old.name.endswith(writers_key()):
            shutil.rmtree(old, ignore_errors=True)
    src = template(kind)
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(mode=0o700, parents=True)
    base = json.loads((src / "status.json").read_text())
    started = time.monotonic()
    for i in range(size):
        copy_run(src, path, i, base)
    marker.touch()
    print(f"made {size:,} {kind} runs in {path} in {time.monotonic() - started:.0f} s", flush=True)
    return path


def arms(path: Path) -> dict:
    env = benchkit.with_bytecode(benchkit.cockpit_env())  # compiled, as an installed cockpit starts
    argv = {"loop": [sys.executable, "-c", LOOP, str(path)],
            "ps": benchkit.cockpit_argv("ps", "--runs-dir", str(path)),
            "ps --json": benchkit.cockpit_argv("ps", "--runs-dir", str(path), "--json")}

    def arm(a: list[str], env: dict = env):
        return lambda: (lambda c: {"wall": c.wall, "rss": c.peak_rss_mb})(benchkit.run_child(a, env=env))

    got = {name: arm(a) for name, a in argv.items()}
    if BASELINE is not None:
        base = benchkit.with_bytecode(benchkit.cockpit_env(PYTHONPATH=str(BASELINE)))
        got["ps base"] = arm(argv["ps"], base)
    return got


def check_listing(path: Path, size: int) -> None:
    """ps --json lists every run, each succeeded: the copies are runs cockpit reads."""
    out = benchkit.run_child(benchkit.cockpit_argv("ps", "--runs-dir", str(path), "--json"),
                             env=benchkit.with_bytecode(benchkit.cockpit_env()), capture=True).stdout
    runs = json.loads(out)["runs"]
    states = {r["state"] for r in runs}
    if len(runs) != size or states != {"succeeded"}:
        sys.exit(f"{path}: cockpit ps --json lists {len(runs)} runs ({states}), not {size} succeeded ones")


def measure(kind: str, size: int, runs: int, rebuild: bool, report: benchkit.Report, prune: bool = True) -> dict:
    path = runs_dir(kind, size, rebuild, prune)
    check_listing(path, size)
    load = benchkit.load()
    got = benchkit.alternated(arms(path), runs)
    loop = benchkit.median(r["wall"] for r in got["loop"])
    fig = {"runs": size, "metrics": kind, "load": [load, benchkit.load()]}
    print(f"\n{size:,} runs ({kind} metrics); load {load} -> {benchkit.load()}; {runs} runs each, alternated")
    print(f"  {'arm':10} {'wall ms median [min-max]':>26} {'x loop':>7} {'peak RSS MB [min-max]':>24}")
    for name, rs in got.items():
        wall = [r["wall"] for r in rs]
        rss = [r["rss"] for r in rs]
        ratio = benchkit.median(wall) / loop
        print(f"  {name:10} {benchkit.spread(wall, '{:.0f}', 1000):>26} {ratio:7.1f} "
              f"{benchkit.spread(rss, '{:.0f}'):>24}")
        fig[name] = {"median_ms": round(benchkit.median(wall) * 1000, 1), "x_loop": round(ratio, 2),
                     "wall_ms": [round(w * 1000, 1) for w in wall], "peak_rss_mb": round(max(rss), 1)}
    report.figure(f"{kind}_{size}", fig)
    return fig


def goals(figs: list[dict], report: benchkit.Report) -> None:
    for fig in figs:
        x = fig["ps"]["x_loop"]
        print(f"ps at {fig['runs']:,} runs ({fig['metrics']}): {x}x the loop; "
              + report.goal(f"ps x loop, {fig['metrics']} {fig['runs']}", f"<= {GOAL_X_LOOP:g}x the loop", x,
                            x <= GOAL_X_LOOP))
    for fig in figs:
        if fig["runs"] >= 5000:
            ms = fig["ps"]["median_ms"]
            print(f"ps at {fig['runs']:,} runs ({fig['metrics']}): {ms:.0f} ms; "
                  + report.goal(f"ps ms, {fig['metrics']} {fig['runs']}", f"<= {GOAL_MS_AT_5000:g} ms at 5,000 runs",
                                ms, ms <= GOAL_MS_AT_5000))
    short = sorted((f for f in figs if f["metrics"] == "short"), key=lambda f: f["runs"])
    if len(short) > 1:
        lo, hi = short[0]["ps --json"]["peak_rss_mb"], short[-1]["ps --json"]["peak_rss_mb"]
        print(f"ps --json peak RSS {lo:.0f} MB at {short[0]['runs']:,} runs -> {hi:.0f} MB at {short[-1]['runs']:,}; "
              + report.goal("ps --json flat memory", f"<= {GOAL_FLAT:g}x from the smallest size to the largest",
                            round(hi / lo, 2), hi / lo <= GOAL_FLAT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[10, 100, 1000, 5000], help="runs of the short template")
    ap.add_argument("--long", type=int, nargs="*", default=[5000], help="runs of the real-length metrics template")
    ap.add_argument("--runs", type=int, default=5, help="runs of each arm per size")
    ap.add_argument("--rebuild", action="store_true", help="make the runs directories again")
    ap.add_argument("--json", metavar="PATH", help="write the figures and goals as JSON (- for stdout)")
    ap.add_argument("--profile", action="store_true", help="then cProfile ps at the largest size of each kind")
    ap.add_argument("--smoke", action="store_true", help="10 short runs, one run each (the suite's smoke test)")
    ap.add_argument("--baseline", type=Path, metavar="DIR", help="also `ps` with the cockpit of checkout DIR (e.g. "
                    "a `git worktree` of main), alternated with the others: before and after in one run")
    args = ap.parse_args()
    global BASELINE
    BASELINE = args.baseline
    if args.smoke:
        args.sizes, args.long, args.runs = [10], [], 1
    report = benchkit.Report("ps")
    figs = [measure("short", n, args.runs, args.rebuild, report, prune=not args.smoke) for n in args.sizes]
    figs += [measure("long", n, args.runs, args.rebuild, report) for n in args.long]
    print()
    goals(figs, report)
    report.dump(args.json)
    if args.profile:
        for kind, sizes in (("short", args.sizes), ("long", args.long)):
            if sizes:
                print(f"\ncProfile of cockpit ps, {max(sizes):,} runs ({kind} metrics):")
                print(benchkit.cprofile_top(["ps", "--runs-dir", str(runs_dir(kind, max(sizes), False))]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
