"""The rank side of tests/bench/bench_restart.py: runs jobs/demo.py as its rank (the job's script) and writes
when this rank got to each point of its start, as wall times, to <run>/probe/rank-R.attempt-A.json:

- ``exec``: the process's start (/proc/self/stat: its start in clock ticks since boot, plus the boot time),
- ``torch``: ``import torch`` done (its seconds are the torch import measured in the run itself),
- ``pg``: torch.distributed.init_process_group returned (the rendezvous with the other ranks),
- ``ckpt``: cockpit.train's checkpoint read (the resume's load).

The first step is the run's own record (status.json's attempts: rank 0's first metrics record)."""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
from pathlib import Path

t_begin = time.time()
import torch  # noqa: E402  - its import is what is timed
import torch.distributed as dist  # noqa: E402

MARKS: dict[str, float] = {"begin": t_begin, "torch": time.time()}
DEMO = Path(__file__).resolve().parents[2] / "jobs" / "demo.py"


def exec_time() -> float | None:
    """Wall time this process was started, from /proc (None where it cannot be read)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def save() -> None:
    run_dir = os.environ.get("COCKPIT_RUN_DIR")
    if not run_dir:
        return
    out = Path(run_dir) / "probe"
    out.mkdir(exist_ok=True)
    name = f"rank-{os.environ.get('RANK', '0')}.attempt-{os.environ.get('COCKPIT_ATTEMPT', '0')}.json"
    (out / name).write_text(json.dumps(MARKS))


def _timed(fn, key: str):
    def inner(*args, **kwargs):
        result = fn(*args, **kwargs)
        MARKS[key] = time.time()
        save()
        return result
    return inner


def main() -> None:
    from cockpit.train import checkpoint

    started = exec_time()
    if started is not None:
        MARKS["exec"] = started
    dist.init_process_group = _timed(dist.init_process_group, "pg")
    checkpoint.load_latest = _timed(checkpoint.load_latest, "ckpt")
    save()
    assert torch.__version__  # the import above is used
    sys.argv = [str(DEMO), *sys.argv[1:]]
    runpy.run_path(str(DEMO), run_name="__main__")


if __name__ == "__main__":
    main()
