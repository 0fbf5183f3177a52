"""A script that is not cockpit.train, with a known step rate: one "step" every --sleep seconds, each written to
$COCKPIT_RUN_DIR/metrics/rank-0.jsonl as {"step", "time"} (the minimal record the forecast reads; the total
comes from the job's total_steps:). --fail-unless FILE: exit 3 at once when FILE does not exist, so a rerun
with identical arguments can succeed once the test has made it (a fixed mount, a fixed data file).

    paced_train.py --steps 40 --sleep 0.25 [--fail-unless PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--sleep", type=float, default=0.25)
    p.add_argument("--fail-unless", default=None)
    args = p.parse_args()
    if args.fail_unless and not Path(args.fail_unless).exists():
        print(f"paced: {args.fail_unless} is missing", flush=True)
        sys.exit(3)
    out = None
    if os.environ.get("RANK", "0") == "0" and os.environ.get("COCKPIT_RUN_DIR"):
        path = Path(os.environ["COCKPIT_RUN_DIR"]) / "metrics" / "rank-0.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        out = path.open("a", buffering=1, encoding="utf-8")
    start = time.monotonic()
    for step in range(1, args.steps + 1):
        time.sleep(max(0.0, start + step * args.sleep - time.monotonic()))  # on a fixed clock: no drift
        if out is not None:
            out.write(json.dumps({"step": step, "time": time.time()}) + "\n")
    print(f"paced: {args.steps} steps done", flush=True)


if __name__ == "__main__":
    main()
