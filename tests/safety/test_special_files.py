"""Special files hang everything (issue 27, 4): a FIFO named status.json in any run directory, a FIFO rank log,
beat or metrics file, /dev/zero as a rank log or a metrics file (a symlink, or a device node of its own). Each is
skipped and said; every other run and file is read as before; nothing waits and nothing grows. The subprocess
timeouts are hang guards only (memory is bench_safety's)."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from safety.hostile import cockpit, make_run, rank_file

GOOD = "good-20260101-000000-aaaa"


def good_run(runs: Path, state: str = "succeeded") -> Path:
    run = make_run(runs, GOOD, state=state, world_size=2)
    rank_file(run, "log").write_text("[rank0] step=1 loss=2.0\n[rank0] done\n")
    now = time.time()
    (run / "metrics" / "rank-0.jsonl").write_text("".join(
        json.dumps({"step": s, "time": now - 40 + s, "loss": 1.0 / s}) + "\n" for s in range(1, 30)))
    return run


def dev_zero(path: Path, how: str) -> None:
    if how == "symlink":
        path.symlink_to("/dev/zero")
    else:  # a character device node of its own, not a link (root may make one, and so may a container's user)
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))


def test_a_fifo_status_in_another_run_hangs_no_command(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    good_run(runs)
    fifo_run = runs / "fifo-20260101-000000-bbbb"
    (fifo_run / "logs").mkdir(parents=True)
    os.mkfifo(fifo_run / "status.json")
    ps = cockpit("ps", runs=runs)
    assert ps.returncode == 0 and GOOD in ps.stdout, ps.stderr
    assert "unreadable" in ps.stdout and "a FIFO, not a regular file" in ps.stdout
    for args in (["logs", GOOD], ["attach", GOOD], ["plot", GOOD, "--width", "60", "--height", "12"],
                 ["diagnose", GOOD], ["ps", "--json"]):
        r = cockpit(*args, runs=runs)
        assert r.returncode in (0, 1) and "Traceback" not in r.stderr, (args, r.stderr)
    stop = cockpit("stop", fifo_run.name, runs=runs)  # the FIFO run itself: a clear refusal, no wait
    assert stop.returncode == 2 and "a FIFO" in stop.stderr, stop.stderr


def test_a_fifo_rank_log_is_skipped_and_said(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    run = good_run(runs)
    os.mkfifo(rank_file(run, "log", 1))
    logs = cockpit("logs", GOOD, runs=runs)
    assert logs.returncode == 0 and "[node0:0] [rank0] done" in logs.stdout, logs.stderr
    assert "rank-1.node0.log: skipped: a FIFO" in logs.stderr
    diagnose = cockpit("diagnose", GOOD, runs=runs)
    assert diagnose.returncode == 0 and "Skipped 1 file(s)" in diagnose.stdout and "a FIFO" in diagnose.stdout
    attach = cockpit("attach", GOOD, runs=runs)
    assert attach.returncode == 0 and GOOD in attach.stdout, attach.stderr


@pytest.mark.parametrize("kind", ["beat", "metrics"])
def test_a_fifo_beat_or_metrics_file_hangs_no_plot(tmp_path, kind):
    runs = tmp_path / "runs"
    runs.mkdir()
    run = good_run(runs)
    os.mkfifo(rank_file(run, "beat", 1) if kind == "beat" else run / "metrics" / "rank-1.jsonl")
    r = cockpit("plot", GOOD, "--width", "60", "--height", "12", runs=runs)
    assert r.returncode == 0 and "loss per rank" in r.stdout, r.stderr
    assert "skipped: a FIFO, not a regular file" in r.stderr


@pytest.mark.parametrize("how", ["symlink", "device"])
def test_dev_zero_as_a_rank_log_is_skipped_and_said(tmp_path, how):
    runs = tmp_path / "runs"
    runs.mkdir()
    run = good_run(runs, state="failed")
    dev_zero(rank_file(run, "log", 1), how)
    why = "symbolic link" if how == "symlink" else "a character device"
    logs = cockpit("logs", GOOD, "--rank", "1", runs=runs)
    assert logs.returncode == 0 and logs.stdout == "" and why in logs.stderr, logs.stderr
    tail = cockpit("logs", GOOD, "--rank", "1", "-n", "5", runs=runs)
    assert tail.returncode == 0 and tail.stdout == "" and why in tail.stderr, tail.stderr
    assert cockpit("ps", runs=runs).returncode == 0
    diagnose = cockpit("diagnose", GOOD, runs=runs)
    assert diagnose.returncode in (0, 1) and "Skipped 1 file(s)" in diagnose.stdout, diagnose.stderr


@pytest.mark.parametrize("how", ["symlink", "device"])
def test_dev_zero_as_the_first_failures_log_or_metrics_hangs_nothing(tmp_path, how):
    runs = tmp_path / "runs"
    runs.mkdir()
    now = time.time()
    exit_rec = {"host": "node0", "rank": 0, "signal": None, "status": 1, "time": now - 2}
    run = make_run(runs, GOOD, state="failed", ranks={"0": exit_rec},
                   first_failure={**exit_rec, "describe": "exit code 1"})
    dev_zero(rank_file(run, "log"), how)
    dev_zero(run / "metrics" / "rank-0.jsonl", how)
    attach = cockpit("attach", GOOD, runs=runs)  # the summary shows the first failure's last lines
    assert attach.returncode == 1 and "first failure: rank 0" in attach.stdout, attach.stderr
    ps = cockpit("ps", runs=runs)
    assert ps.returncode == 0 and GOOD in ps.stdout, ps.stderr
    plot = cockpit("plot", GOOD, runs=runs)
    assert plot.returncode == 2 and "nothing to draw" in plot.stderr and "skipped" in plot.stderr, plot.stderr


def test_a_rank_log_that_is_a_symlink_to_another_file_is_never_read(tmp_path):
    """A link planted at a rank log's name (to a file the reader may read, and the planter may not) is not
    followed by any reader: logs, logs -f (the tail engine), attach, diagnose."""
    runs = tmp_path / "runs"
    runs.mkdir()
    run = good_run(runs)
    secret = tmp_path / "readers-own-secret"
    secret.write_text("API_KEY=hunter2\n")
    rank_file(run, "log", 1).symlink_to(secret)
    for args in (["logs", GOOD], ["logs", GOOD, "-f"], ["attach", GOOD, "--from-start"], ["diagnose", GOOD, "--json"]):
        r = cockpit(*args, runs=runs)
        assert r.returncode in (0, 1) and "hunter2" not in r.stdout + r.stderr, (args, r.stdout, r.stderr)
        assert "[rank0] done" in r.stdout or args[0] != "logs", (args, r.stdout)  # the other rank as before
