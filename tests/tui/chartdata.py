"""Run directories for the charts tests: 4 ranks writing cockpit.train's metrics records at 2 steps/s, rank 2 a
straggler at half that rate for 15 s, rank 3 stalled for the last 20 s while the others go on; the rank hook's
beats to match (who waits in collectives for whom, second by second); and a sweep
of 3 trials with their arguments. Fixed times (no clock), deterministic losses (no randomness)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from tui.tuidata import NOW

from cockpit.run.records import NodeRecord, Trial
from cockpit.run.store import RunStatus, create_run_dir, write_status

T0 = NOW - 3600
RANKS = 4
STRAGGLER, STALLED = 2, 3
SLOW = (15.0, 30.0)  # seconds in which the straggler steps at half the rate
STALL_AT = 40.0  # the stalled rank's last record; the others go on to END
END = 60.0
HOSTS = ("gpu-a5000", "gpu-a5000", "gpu-h100", "gpu-h100")  # rank -> host: two ranks on each of two nodes
GPU_JOB = "name: charts\nscript: train.py\nlauncher: ssh\nhosts: [gpu-a5000, gpu-h100]\ngpus: [0, 1]\n"
CPU_JOB = "name: charts\nscript: train.py\ngpus: none\n"


def loss_at(rank: int, step: int) -> float:
    return 2.0 * math.exp(-step / 40) + 0.1 + 0.02 * rank + 0.01 * math.sin(step * 1.7 + rank)


def rank_records(rank: int) -> list[dict]:
    """One record per step: 0.5 s a step, 1 s inside SLOW for the straggler; the stalled rank stops at STALL_AT."""
    out, t, step = [], 0.0, 0
    stop = STALL_AT if rank == STALLED else END
    while t < stop:
        t += 1.0 if rank == STRAGGLER and SLOW[0] <= t < SLOW[1] else 0.5
        step += 1
        out.append({"step": step, "epoch": 0, "loss": round(loss_at(rank, step), 6), "samples_per_s": 256.0,
                    "time": T0 + t, "rank": rank})
    return out


def wait_share(rank: int, t: float) -> float:
    """The share of second t..t+1 the rank spends inside collectives, as a synchronous job would: everyone 10%;
    in SLOW the others wait 50% for the straggler, which waits 5%; after STALL_AT the stalled rank is stuck in
    its own code (0%) and the others wait inside the collective (100%)."""
    if t >= STALL_AT:
        return 0.0 if rank == STALLED else 1.0
    if SLOW[0] <= t < SLOW[1]:
        return 0.05 if rank == STRAGGLER else 0.5
    return 0.1


def beat_lines(rank: int) -> list[str]:
    """The rank hook's beats, one a second: collectives called and seconds spent inside them."""
    out, sync = [], 0.0
    for i in range(int(END) + 1):
        out.append(json.dumps({"t": T0 + i, "pid": 100 + rank, "sync": round(sync, 3), "n": i, "in": None}) + "\n")
        sync += wait_share(rank, float(i))
    return out


def make_charts_run(runs_dir: Path, job: str = GPU_JOB) -> Path:
    run_id = "charts-20261231-000000-ab04"
    run_dir = create_run_dir(runs_dir, run_id)
    (run_dir / "job.yaml").write_text(job)
    status = RunStatus(run_id=run_id, name="charts", launcher="ssh", job_file="/work/jobs/charts.yaml",
                       hosts=sorted(set(HOSTS)), world_size=RANKS, state="stopped", created=T0 - 5, started=T0 - 4,
                       ended=T0 + END + 5, exit_code=143)
    (run_dir / "metrics").mkdir()
    for rank in range(RANKS):
        (run_dir / "logs" / f"rank-{rank}.{HOSTS[rank]}.log").write_text(f"[cockpit] start rank={rank} world=4\n")
        (run_dir / "logs" / f"rank-{rank}.{HOSTS[rank]}.beat").write_text("".join(beat_lines(rank)))
        with open(run_dir / "metrics" / f"rank-{rank}.jsonl", "w") as f:
            f.writelines(json.dumps(rec) + "\n" for rec in rank_records(rank))
    write_status(run_dir, status)
    return run_dir


TRIAL_LR = ("0.1", "0.03", "0.01")


def make_charts_sweep(runs_dir: Path) -> Path:
    """A finished local sweep of 3 trials (--lr each), one rank each, 40 steps at different speeds."""
    run_dir = create_run_dir(runs_dir, "sw-20261231-000000-abcd")
    (run_dir / "job.yaml").write_text("name: sw\nscript: train.py\nsweep:\n  grid: {lr: [0.1, 0.03, 0.01]}\n")
    sweep = RunStatus(run_id=run_dir.name, name="sw", launcher="local", job_file="/j/sw.yaml", hosts=[],
                      world_size=None, state="succeeded", created=T0, started=T0, ended=T0 + 60, exit_code=0)
    for i, lr in enumerate(TRIAL_LR):
        tdir = run_dir / f"trial-{i}"
        (tdir / "metrics").mkdir(parents=True)
        write_status(tdir, RunStatus(run_id=f"{run_dir.name}.trial-{i}", name="sw", launcher="local",
                                     job_file="/j/sw.yaml", hosts=["node0"], world_size=1, state="succeeded",
                                     created=T0, started=T0, ended=T0 + 60))
        with open(tdir / "metrics" / "rank-0.jsonl", "w") as f:
            for step in range(1, 41):
                loss = 2.0 * math.exp(-step * float(lr) / 2) + 0.05 * i
                f.write(json.dumps({"step": step, "loss": round(loss, 6), "time": T0 + step * (1 + 0.5 * i)}) + "\n")
        sweep.nodes.append(NodeRecord(f"trial-{i}", i, state="succeeded", run_dir=str(tdir),
                                      trial=Trial(i, ("--lr", lr), (), 0)))
    write_status(run_dir, sweep)
    return run_dir
