"""Benchmark: jobs/demo.py launched by bare torchrun vs. launched by cockpit (not collected by pytest).

    python tests/bench/bench_train.py                      # bare torchrun vs cockpit run, 5 runs each
    python tests/bench/bench_train.py --runs 7 --steps 150 --json out.json
    python tests/bench/bench_train.py --smoke               # one short run each (the smoke test)

Per run it measures, from rank 0's metrics file (``<run_dir>/metrics/rank-0.jsonl``):

* launch_to_first_step_s: wall time from starting the launch command to the first step's metrics record
  (interpreter + torch import + process group + DDP setup + first step: what a user waits for);
* steps_per_s: steady-state optimizer steps per second, from the first to the last record;
* wall_s: until the launch command exits.

Launchers alternate run by run (bare, cockpit, bare, ...) so drift in machine load hits both alike.
Bare torchrun gets exactly one cockpit variable, COCKPIT_RUN_DIR, which only tells the demo where to write
its metrics; everything else is the runtime's bare-torchrun defaults.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "jobs" / "demo.py"
DEMO_STEPS = 150


def demo_args(steps: int = DEMO_STEPS) -> list[str]:
    return ["--epochs", "1", "--steps-per-epoch", str(steps), "--hidden", "256"]


DEMO_ARGS = demo_args()


@dataclass(frozen=True)
class LaunchPlan:
    """What to run: the command, its environment, and the run directory whose metrics it writes."""

    cmd: list[str]
    env: dict[str, str]
    run_dir: Path


Launcher = Callable[[Path], LaunchPlan]
"""Given a fresh, empty directory for this run, say how to launch the demo into it."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env() -> dict[str, str]:
    """The caller's environment without launcher or contract variables."""
    drop = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("COCKPIT_", "SLURM_"))}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def bare_torchrun(run_dir: Path, nproc: int = 2, args: tuple[str, ...] = tuple(DEMO_ARGS)) -> LaunchPlan:
    """The baseline: ``torchrun --nproc-per-node N jobs/demo.py`` on a free local port."""
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
           "--master-addr=127.0.0.1", f"--master-port={free_port()}", str(DEMO), *args]
    return LaunchPlan(cmd, {**base_env(), "COCKPIT_RUN_DIR": str(run_dir)}, run_dir)


def cockpit_launch(run_dir: Path, args: tuple[str, ...] = tuple(DEMO_ARGS)) -> LaunchPlan:
    """``cockpit run jobs/demo.yaml -q -- DEMO_ARGS``: the same 2 gloo ranks, through cockpit's launcher
    (run directory, supervisor, rank wrapper, log files, live follow and summary). ``run_dir`` is the runs
    directory; the run's own directory is the one child cockpit creates in it."""
    cmd = [sys.executable, "-m", "cockpit", "run", str(REPO / "jobs" / "demo.yaml"), "-q", "--", *args]
    return LaunchPlan(cmd, {**base_env(), "COCKPIT_RUNS_DIR": str(run_dir)}, run_dir)


def read_metrics(run_dir: Path, rank: int = 0) -> list[dict]:
    path = run_dir / "metrics" / f"rank-{rank}.jsonl"
    if not path.exists():  # a runs directory (cockpit): the metrics are in its one run
        [path] = run_dir.glob(f"*/metrics/rank-{rank}.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def measure(launch: Launcher, run_dir: Path, timeout_s: float = 300) -> dict[str, float]:
    """Run one launch to completion and return its timings (raises if it fails)."""
    plan = launch(run_dir)
    started = time.time()
    done = subprocess.run(plan.cmd, env=plan.env, cwd=REPO, capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    wall = time.time() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(plan.cmd)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    lines = read_metrics(plan.run_dir)
    first, last = lines[0], lines[-1]
    steps_per_s = (last["step"] - first["step"]) / max(last["time"] - first["time"], 1e-9)
    return {"launch_to_first_step_s": first["time"] - started, "steps_per_s": steps_per_s, "wall_s": wall}


def summarize(results: dict[str, list[dict[str, float]]]) -> str:
    rows = [f"{'launcher':<10} {'metric':<24} {'median':>9} {'min':>9} {'max':>9}  n"]
    for name, runs in results.items():
        for metric in ("launch_to_first_step_s", "steps_per_s", "wall_s"):
            values = [r[metric] for r in runs]
            rows.append(f"{name:<10} {metric:<24} {statistics.median(values):9.3f} "
                        f"{min(values):9.3f} {max(values):9.3f}  {len(values)}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5, help="runs per launcher (alternated)")
    p.add_argument("--bare-only", action="store_true", help="only bare torchrun (no cockpit runs)")
    p.add_argument("--json", type=Path, default=None, help="write every run's timings here")
    p.add_argument("--steps", type=int, default=DEMO_STEPS, help="the demo's steps per run")
    p.add_argument("--smoke", action="store_true", help="one short run per launcher (the test suite's smoke test)")
    args = p.parse_args(argv)
    if args.smoke:
        args.runs, args.steps = 1, 12
    demo = tuple(demo_args(args.steps))
    launchers: dict[str, Launcher] = {"bare": functools.partial(bare_torchrun, args=demo)}
    if not args.bare_only:
        launchers["cockpit"] = functools.partial(cockpit_launch, args=demo)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in launchers}
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        for i in range(args.runs):
            for name, launch in launchers.items():
                timings = measure(launch, Path(tmp) / f"{name}-{i}")
                results[name].append(timings)
                print(f"run {i} {name}: " + " ".join(f"{k}={v:.3f}" for k, v in timings.items()), flush=True)
    print(summarize(results))
    if "cockpit" in results:
        med = {name: {m: statistics.median(r[m] for r in runs) for m in runs[0]} for name, runs in results.items()}
        print(f"steps/s ratio cockpit/bare: {med['cockpit']['steps_per_s'] / med['bare']['steps_per_s']:.3f} "
              f"(target >= 0.99); launch-to-first-step overhead: "
              f"{med['cockpit']['launch_to_first_step_s'] - med['bare']['launch_to_first_step_s']:+.2f} s "
              f"(target <= +0.5 s)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
