"""Benchmark: how fast cockpit's hang watch names a stall, and what it says on the hang patterns (not collected
by pytest). What the rank hook costs a training run is `bench_train.py --hook` (hook off / on / Flight Recorder
off, alternated, with CPU per sample): this bench's own on/off pairs measured the same and went.

    python tests/bench/bench_hang.py                  # 3 stalls
    python tests/bench/bench_hang.py --smoke          # 1 stall (the smoke test)
    python tests/bench/bench_hang.py --stalls 0 --scenarios [--cockpit /other/checkout]

1. Stall to finding. tests/hang/scripts/plain_hang.py with rank 1 stuck in load_batch, `--stall-after S`:
   from the last line any rank wrote (the logs' last write) to the finding in status.json, minus S — the
   watch's own delay (look interval + gathering every rank's stacks and Flight Recorder state).
2. Scenarios (--scenarios): the hang patterns of tests/hang/scripts (a rank-0 evaluation pause, a blocked
   DataLoader worker, a deadlock before init, uneven inputs, a slow start), each run once with a small
   stall_after and on_stall: stop: the answer (the finding's culprits and the start of its text, or none) and
   the seconds from the logs' last write to it. `--cockpit DIR` runs another checkout's cockpit on the same
   scripts (the "before" of a change: a job field it does not know is left out).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HANG = REPO / "tests" / "hang" / "scripts" / "plain_hang.py"


def env(runs: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("COCKPIT_", "SLURM_"))}
    out.update(COCKPIT_RUNS_DIR=str(runs), NO_COLOR="1")
    return out


def stall_delay(stall_after: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        job = tmp / "stuck.yaml"
        job.write_text(f"name: stuck\nscript: {HANG}\nargs: [--stuck-rank, '1', --stuck-step, '3']\n"
                       "launcher: local\ngpus: none\non_stall: stop\n")
        runs = tmp / "runs"
        proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(job), "-q", "--grace", "2",
                                 "--stall-after", str(stall_after)], cwd=REPO, env=env(runs),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        found_at, last_line = None, None
        while proc.poll() is None:
            if found_at is None:  # the logs' last write before the finding (the stop writes more after it)
                mtimes = [p.stat().st_mtime for p in runs.glob("*/logs/rank-*.log")]
                last_line = max(mtimes) if mtimes else None
            for status in runs.glob("*/status.json"):
                try:
                    data = json.loads(status.read_text())
                except ValueError:
                    continue
                if any(f["kind"] == "stall" for f in data.get("findings", ())) and found_at is None:
                    found_at = time.time()
            time.sleep(0.02)
        if found_at is None or last_line is None:
            raise SystemExit("no finding appeared")
        return found_at - last_line - stall_after


SCENARIOS = (  # name, script, args, job fields (start_after only for a cockpit that knows it)
    ("eval pause 12 s on rank 0", "eval_pause.py", ["--steps", "900", "--eval-every", "400", "--eval-s", "12"],
     "stall_after: 5\n"),
    ("DataLoader worker of rank 0", "loader_hang.py", ["--stuck-rank", "0"], "stall_after: 4\non_stall: stop\n"),
    ("deadlock before init", "deadlock_init.py", ["--holder", "1"],
     "stall_after: 3\non_stall: stop\nstart_after: 20\n"),
    ("uneven inputs, 3 ranks", "uneven.py", ["--long-rank", "1"],
     "stall_after: 4\non_stall: stop\nprocs_per_node: 3\n"),
    ("slow start 10 s (healthy)", "eval_pause.py", ["--quiet-start", "10", "--steps", "250", "--eval-every", "1000"],
     "stall_after: 6\n"),
)


def scenario(root: Path, name: str, script: str, args: list[str], fields: str) -> str:
    """One scenario under ``root``'s cockpit: what it said first, and when, from the logs' last write."""
    if "start_after" not in (root / "cockpit" / "spec" / "model.py").read_text():
        fields = "".join(f for f in fields.splitlines(keepends=True) if not f.startswith("start_after"))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        job = tmp / "job.yaml"
        job.write_text(f"name: scen\nscript: {REPO / 'tests' / 'hang' / 'scripts' / script}\nargs: {json.dumps(args)}\n"
                       f"launcher: local\ngpus: none\n{fields}")
        runs = tmp / "runs"
        e = {**env(runs), "PYTHONPATH": str(root)}
        proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(job), "-q", "--grace", "2"], cwd=root,
                                env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        said, last_line = None, None
        while proc.poll() is None or said is None:
            mtimes = [p.stat().st_mtime for p in runs.glob("*/logs/rank-*.log")]
            for status in runs.glob("*/status.json"):
                try:
                    found = [f for f in json.loads(status.read_text()).get("findings", ()) if f["kind"] == "stall"]
                except ValueError:
                    continue
                if found and said is None:
                    culprits = [c["rank"] for c in found[0]["culprits"]]
                    said = (f"{time.time() - last_line:5.1f} s: culprits {culprits}: {found[0]['text'][:150]}"
                            if last_line else f"culprits {culprits}: {found[0]['text'][:150]}")
            last_line = max(mtimes) if mtimes and said is None else last_line
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        proc.wait()
        return f"{name}: {said or 'no finding'}"


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f}, min {min(values):.3f}, max {max(values):.3f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--stalls", type=int, default=3)
    p.add_argument("--stall-after", type=int, default=5)
    p.add_argument("--smoke", action="store_true", help="one stall: that it still runs")
    p.add_argument("--scenarios", action="store_true", help="the hang patterns of tests/hang/scripts, once each")
    p.add_argument("--cockpit", type=Path, default=REPO, help="the checkout whose cockpit runs the scenarios")
    a = p.parse_args()
    if a.smoke:
        a.stalls, a.stall_after = 1, 2
    delays = [stall_delay(a.stall_after) for _ in range(a.stalls)]
    for d in delays:
        print(f"stall -> finding: stall_after {a.stall_after} s + {d:.2f} s")
    if delays:
        print(f"the watch's own delay beyond stall_after: {spread(delays)} s (look every 1 s + gathering stacks)")
    if a.scenarios:
        for name, script, args, fields in SCENARIOS:
            print(scenario(a.cockpit.resolve(), name, script, args, fields), flush=True)


if __name__ == "__main__":
    main()
