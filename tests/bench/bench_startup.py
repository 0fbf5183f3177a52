"""Cold start of cockpit's light commands beside `python -c pass` (the Python floor) and `torchrun --help`.

    python tests/bench/bench_startup.py [--runs 21] [--no-torchrun] [--json PATH|-] [--smoke] [--profile]
                                        [--instructions]

Each command is a fresh process, run to its end with its output to /dev/null; "cold" means a fresh interpreter
with the page cache warm (one unrecorded round first), not a cold disk, and cockpit's modules compiled
(benchkit.with_bytecode: an installed cockpit has its bytecode; no module is compiled from source per start).
The commands are alternated run by run (the order reversed every other run) so that machine noise hits all alike.
Printed per command: wall ms median [min-max], the ratio of the medians to `python -c pass` (issue 29's goal: <= 2x
for `--help`, `validate`, `render` and `ps`) and to `torchrun --help` (the foundation issue's goal: <= 0.1x), and
the 1-minute load before and after. `ps` lists an empty runs directory (what a start costs; listing many runs is
bench_ps.py).
``--profile``: then, per command, where its start goes: ``python -X importtime``'s slowest imports (median of 5).
``--instructions``: then each command's instructions (valgrind --tool=callgrind, one run each) and their ratio to
`python -c pass`'s: the user-space instructions of a start are the same under any load, where the wall time of a
start on a shared 2-core machine is not (the figures the previous sessions compared: python -c pass about 145 M).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit  # noqa: E402

ANCHOR = "python -c pass"
GOAL_X_PYTHON = 2.0  # issue 29: each light command within 2x the Python floor
GOAL_X_TORCHRUN = 0.1  # the foundation issue: cockpit's start within 0.1x torchrun's


def commands(runs_dir: Path, torchrun: bool) -> dict[str, list[str]]:
    root = benchkit.ROOT
    cmds = {ANCHOR: [sys.executable, "-c", "pass"],
            "cockpit --help": benchkit.cockpit_argv("--help"),
            "cockpit validate jobs/demo.yaml": benchkit.cockpit_argv("validate", str(root / "jobs" / "demo.yaml")),
            "cockpit render jobs/demo.yaml": benchkit.cockpit_argv("render", str(root / "jobs" / "demo.yaml")),
            "cockpit ps": benchkit.cockpit_argv("ps", "--runs-dir", str(runs_dir))}
    if torchrun:
        exe = shutil.which("torchrun") or sys.exit("torchrun is not on PATH (pip install torch; or --no-torchrun)")
        cmds["torchrun --help"] = [exe, "--help"]
    return cmds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--no-torchrun", action="store_true", help="leave out the torchrun --help arm")
    parser.add_argument("--json", metavar="PATH", help="write the figures and goals as JSON (- for stdout)")
    parser.add_argument("--smoke", action="store_true", help="one run each (the test suite's smoke test)")
    parser.add_argument("--profile", action="store_true", help="then each command's slowest imports")
    parser.add_argument("--instructions", action="store_true", help="then each command's instructions (callgrind)")
    parser.add_argument("--baseline", type=Path, metavar="DIR", help="also each cockpit command with the cockpit of "
                        "checkout DIR (e.g. a `git worktree` of main), alternated with the others")
    args = parser.parse_args()
    runs = 1 if args.smoke else args.runs
    report = benchkit.Report("startup")
    env = benchkit.with_bytecode(benchkit.cockpit_env())  # compiled, as an installed cockpit starts
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        runs_dir = Path(tmp) / "runs"
        runs_dir.mkdir(mode=0o700)
        cmds = commands(runs_dir, torchrun=not args.no_torchrun)
        arms = {name: (lambda argv=argv: {"wall": benchkit.run_child(argv, env=env).wall})
                for name, argv in cmds.items()}
        if args.baseline:  # the same cockpit commands with another checkout's cockpit first on the path
            base = benchkit.with_bytecode(benchkit.cockpit_env(PYTHONPATH=str(args.baseline)))
            arms.update({f"{name} (base)": (lambda argv=argv: {"wall": benchkit.run_child(argv, env=base).wall})
                         for name, argv in cmds.items() if name.startswith("cockpit")})
        times = {name: [r["wall"] for r in rs] for name, rs in benchkit.alternated(arms, runs).items()}
    floor = benchkit.median(times[ANCHOR])
    torch = benchkit.median(times["torchrun --help"]) if "torchrun --help" in times else None
    print(f"{'command':34} {'wall ms median [min-max]':>26} {'x python':>9} {'x torchrun':>11}   "
          f"({runs} runs each, alternated; load {report.load_before} before, {benchkit.load()} after)")
    for name, ts in times.items():
        med = benchkit.median(ts)
        x_torch = f"{med / torch:11.3f}" if torch else f"{'':11}"
        line = f"{name:34} {benchkit.spread(ts, '{:.0f}', 1000):>26} {med / floor:9.2f} {x_torch}"
        key = name.replace("cockpit ", "").split()[0].lstrip("-")
        report.figure(name, {"wall_ms": [round(t * 1000, 1) for t in ts], "median_ms": round(med * 1000, 1),
                             "x_python": round(med / floor, 2), "x_torchrun": round(med / torch, 3) if torch else None})
        if name.startswith("cockpit") and not name.endswith("(base)"):
            line += "   " + report.goal(f"{key} x python", f"<= {GOAL_X_PYTHON}x python -c pass",
                                        round(med / floor, 2), med / floor <= GOAL_X_PYTHON)
            if torch:
                report.goal(f"{key} x torchrun", f"<= {GOAL_X_TORCHRUN}x torchrun --help", round(med / torch, 3),
                            med / torch <= GOAL_X_TORCHRUN)
        print(line)
    if args.instructions:
        instructions(cmds, env, report)
    report.dump(args.json)
    if args.profile:
        profile(cmds, env)
    return 0


def instructions(cmds: dict[str, list[str]], env: dict, report: benchkit.Report) -> None:
    """Each command's instructions under callgrind and the ratio to the anchor's (ps: an empty new runs directory)."""
    valgrind = shutil.which("valgrind") or sys.exit("--instructions needs valgrind (apt-get install valgrind)")
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        for name, argv in cmds.items():
            if name == "torchrun --help":
                continue
            argv = [*argv[:-1], tmp] if name == "cockpit ps" else argv
            argv = argv if argv[0] == sys.executable else [sys.executable, *argv]  # the console script's python
            r = subprocess.run([valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv], env=env,
                               capture_output=True, text=True, timeout=600)
            found = re.search(r"Collected : (\d+)", r.stderr)
            if found is None:
                sys.exit(f"callgrind said no count for {name}: {r.stderr[-500:]}")
            counts[name] = int(found.group(1))
    print(f"\n{'command':34} {'instructions':>14} {'x python':>9}   (callgrind, one run each)")
    for name, count in counts.items():
        print(f"{name:34} {count / 1e6:12.0f} M {count / counts[ANCHOR]:9.2f}")
        report.figure(f"{name} instructions", {"instructions": count, "x_python": round(count / counts[ANCHOR], 2)})


def profile(cmds: dict[str, list[str]], env: dict) -> None:
    """Each command's slowest imports (the runs directory of ps is gone by now: an empty new one)."""
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        for name, argv in cmds.items():
            if name == "torchrun --help":
                continue
            args = argv[1:] if name == ANCHOR else ["-m", "cockpit", *argv[1:]]
            if name == "cockpit ps":
                args = ["-m", "cockpit", "ps", "--runs-dir", tmp]
            print(f"\n{name}: python -X importtime")
            print(benchkit.importtime_top(args, env=env))


if __name__ == "__main__":
    sys.exit(main())
