"""Benchmark: the restart path of a run that heals itself (recover:), on a real local run (not collected by
pytest).

    python tests/bench/bench_restart.py            # the demo, two injected failures (rank 1 SIGKILLed), 3 rounds
    python tests/bench/bench_restart.py --smoke    # one round, one failure, 30 steps

Each round runs `cockpit run` on a job with ``recover: {attempts: 2}`` whose demo kills rank 1 after step
``--fail-step`` in attempts 0 and 1 (``--fail-attempts 2``); attempt 2 finishes. From status.json's attempts:
per relaunch, the seconds from the failure (the killed rank's exit record) to the next attempt's first step,
split into the teardown (failure -> the attempt's end) and the start (-> first step: torchrun, torch's import,
the rendezvous, the resume); the run's goodput. Beside it, in the same round, the time of a bare
``python -c "import torch"``, which every attempt pays in each rank. The goal from issue 30: the failure to
the next first step in under 10 s plus torch's import.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def import_seconds() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    return time.perf_counter() - t0


def one_round(steps: int, fail_step: int, failures: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "job.yaml"
        job.write_text(f"name: bench-restart\nscript: {REPO / 'jobs' / 'demo.py'}\nlauncher: local\ngpus: none\n"
                       "recover:\n  attempts: 2\n")
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "COCKPIT_RUNS_DIR": f"{tmp}/runs", "NO_COLOR": "1",
               "PYTHONPATH": str(REPO)}
        r = subprocess.run([sys.executable, "-m", "cockpit", "run", str(job), "-q", "--", "--epochs", "1",
                            "--steps-per-epoch", str(steps), "--hidden", "16", "--checkpoint-every", "5",
                            "--fail-rank", "1", "--fail-step", str(fail_step), "--fail-mode", "kill",
                            "--fail-attempts", str(failures)], capture_output=True, text=True, env=env, cwd=REPO)
        [run] = list((Path(tmp) / "runs").iterdir())
        status = json.loads((run / "status.json").read_text())
        torch_s = import_seconds()
    if r.returncode != 0 or len(status["attempts"]) != failures + 1:
        raise SystemExit(f"the run did not heal (exit {r.returncode}): {status.get('note')}\n{r.stdout[-2000:]}")
    a = status["attempts"]
    relaunches = [{"failure_to_first_step": n["first_step"] - p["failed"], "teardown": p["ended"] - p["failed"],
                   "start": n["first_step"] - p["ended"]} for p, n in zip(a, a[1:], strict=False)]
    return {"relaunches": relaunches, "goodput": status["goodput"], "torch_import": torch_s,
            "wall": status["ended"] - status["started"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    rounds, steps, failures = (1, 30, 1) if args.smoke else (args.rounds, args.steps, 2)
    results = [one_round(steps, 12, failures) for _ in range(rounds)]
    for i, res in enumerate(results):
        parts = "; ".join(f"relaunch {k + 1}: {x['failure_to_first_step']:.1f} s (teardown {x['teardown']:.1f} s, "
                          f"start {x['start']:.1f} s)" for k, x in enumerate(res["relaunches"]))
        print(f"round {i + 1}: {parts}; goodput {res['goodput']:.1%} of {res['wall']:.1f} s; "
              f"bare torch import {res['torch_import']:.1f} s")
    total = [x["failure_to_first_step"] for res in results for x in res["relaunches"]]
    over = [x["failure_to_first_step"] - res["torch_import"] for res in results for x in res["relaunches"]]
    print(f"failure -> next first step: median {statistics.median(total):.1f} s [{min(total):.1f}-{max(total):.1f}]; "
          f"beyond one torch import: median {statistics.median(over):.1f} s (goal < 10 s); goodput median "
          f"{statistics.median(r['goodput'] for r in results):.1%}")


if __name__ == "__main__":
    main()
