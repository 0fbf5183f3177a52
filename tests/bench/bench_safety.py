"""Benchmark cockpit's readers on hostile run files: time and peak RSS of each command, beside `cat`/`tail`.

    python tests/bench/bench_safety.py [--root CHECKOUT] [--cases NAME,...] [--cap-mb 3072] [--timeout 60]
                                       [--smoke]

Each case makes a run directory (status.json written by hand, so any checkout can be measured: ``--root``
picks the cockpit that runs, e.g. an export of an older main), then runs ``python -m cockpit ...`` on it
with its output to /dev/null, under an address-space cap (``--cap-mb``: a reader that grows without bound
stops there with a MemoryError instead of taking the machine) and a timeout (a reader that hangs on a FIFO
is killed there). Peak RSS: GNU time's (os.wait4's where there is none). The anchor is what a shell tool
takes on the same file, which it reads once untimed first (the first read of a sparse file fills the page
cache, 3 s a GiB here: both are timed warm). The files: a 2 GiB sparse log (truncate: NULs, no newline), a
2 GiB log of 100-byte lines, a 512 MB line without a newline, a 100 MB tqdm-style log (\\r frames, no
newline), /dev/zero (a symlink) as a rank log and as a metrics file, FIFOs as status.json, a rank log and a
beat file, and JSON nested 100,000 deep. ``--smoke`` shrinks the files to a few MB and runs a few cases.
Not collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30
MB = 1 << 20
HOST = "node0"
TIME = "/usr/bin/time"  # GNU time
NESTED = "[" * 100_000 + "]" * 100_000


@dataclass
class Sizes:
    sparse: int = 2 * GIB
    lines: int = 2 * GIB
    long_line: int = 512 * MB
    tqdm: int = 100 * MB


def status(run_id: str, state: str, ranks: int = 1, first_failure: int | None = None) -> dict:
    now = time.time()
    final = state not in ("running", "starting")
    s = {"run_id": run_id, "name": "bench", "launcher": "local", "job_file": "/nonexistent/job.yaml",
         "hosts": [HOST], "world_size": ranks, "state": state, "created": now - 60, "started": now - 59,
         "ended": now - 1 if final else None, "exit_code": (1 if state == "failed" else 0) if final else None,
         "supervisor": None, "nodes": [], "ranks": {}, "first_failure": None, "stop_requested": False,
         "stopped_at": None, "note": None}
    if first_failure is not None:
        s["ranks"] = {str(first_failure): {"host": HOST, "rank": first_failure, "signal": None, "status": 1,
                                           "time": now - 2}}
        s["first_failure"] = {"describe": "exit code 1", "host": HOST, "rank": first_failure, "signal": None,
                              "status": 1, "time": now - 2}
    return s


def make_run(runs: Path, name: str, state: str = "failed", first_failure: int | None = None) -> Path:
    run = runs / name
    for sub in ("logs", "metrics"):
        (run / sub).mkdir(parents=True, mode=0o700)
    run.chmod(0o700)
    (run / "status.json").write_text(json.dumps(status(name, state, first_failure=first_failure)))
    return run


def log_path(run: Path, rank: int = 0, kind: str = "log") -> Path:
    return run / "logs" / f"rank-{rank}.{HOST}.{kind}"


def sparse(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        f.truncate(size)


def filled(path: Path, size: int, unit: bytes) -> None:
    """``size`` bytes of ``unit`` repeated (written in 8 MiB blocks)."""
    block = unit * max(1, (8 * MB) // len(unit))
    with open(path, "wb") as f:
        left = size
        while left > 0:
            f.write(block[:left])
            left -= len(block)


LINE = b"[rank0] step=12345 loss=2.345678 lr=3.0e-04 grad_norm=1.234 tokens/s=123456 mem=12.3GiB ok......\n"
TQDM = b"\r 45%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88      | 450/1000 [00:01<00:02, 300.12it/s]"


def build(case: str, runs: Path, sizes: Sizes, scratch: Path) -> tuple[list[str], list[str] | None]:
    """Make the case's run under ``runs``; the cockpit arguments and the anchor command."""
    name = f"bench-{case}"
    if case == "logs-2g-sparse":
        run = make_run(runs, name)
        sparse(log_path(run), sizes.sparse)
        return ["logs", name, "--rank", "0"], ["cat", str(log_path(run))]
    if case == "logs-2g-lines":
        run = make_run(runs, name)
        big = scratch / "lines.log"
        if not big.exists() or big.stat().st_size != sizes.lines:
            filled(big, sizes.lines, LINE)
        os.link(big, log_path(run))
        return ["logs", name, "--rank", "0"], ["cat", str(log_path(run))]
    if case in ("logs-n5-512m-line", "diagnose-512m-line"):
        run = make_run(runs, name)
        filled(log_path(run), sizes.long_line, b"x")
        if case.startswith("logs"):
            return ["logs", name, "--rank", "0", "-n", "5"], ["tail", "-n", "5", str(log_path(run))]
        return ["diagnose", name], ["cat", str(log_path(run))]
    if case == "diagnose-tqdm-100m":
        run = make_run(runs, name)
        filled(log_path(run), sizes.tqdm, TQDM)
        return ["diagnose", name], ["cat", str(log_path(run))]
    if case in ("logs-devzero", "attach-devzero", "ps-devzero-metrics", "plot-devzero-metrics"):
        run = make_run(runs, name, first_failure=0 if case == "attach-devzero" else None)
        if case in ("logs-devzero", "attach-devzero"):
            log_path(run).symlink_to("/dev/zero")
        else:
            log_path(run).write_text("[rank0] hello\n")
            (run / "metrics" / "rank-0.jsonl").symlink_to("/dev/zero")
        verb = case.split("-")[0]
        return {"logs": ["logs", name, "--rank", "0"], "attach": ["attach", name], "ps": ["ps"],
                "plot": ["plot", name, "--metric", "loss"]}[verb], None
    if case.endswith("-fifo-status"):  # another run's status.json is a FIFO: every command lists the runs
        good = make_run(runs, name)
        log_path(good).write_text("[rank0] hello\n")
        other = runs / f"{name}-fifo"
        (other / "logs").mkdir(parents=True)
        os.mkfifo(other / "status.json")
        verb = case.split("-")[0]
        return (["ps"] if verb == "ps" else [verb, name]), None
    if case in ("logs-fifo-log", "diagnose-fifo-log"):
        run = make_run(runs, name)
        os.mkfifo(log_path(run))
        return ([case.split("-")[0], name]), None
    if case == "plot-fifo-beat":
        run = make_run(runs, name)
        log_path(run).write_text("[rank0] hello\n")
        os.mkfifo(log_path(run, kind="beat"))
        return ["plot", name], None
    if case == "ps-nested-status":
        make_run(runs, name)
        nested = runs / f"{name}-nested"
        (nested / "logs").mkdir(parents=True)
        (nested / "status.json").write_text(NESTED)
        return ["ps"], None
    if case == "plot-nested-metrics":
        run = make_run(runs, name)
        log_path(run).write_text("[rank0] hello\n")
        lines = [json.dumps({"step": s, "time": time.time() - 50 + s, "loss": 1.0 / s}) for s in range(1, 20)]
        (run / "metrics" / "rank-0.jsonl").write_text("\n".join(lines) + "\n" + NESTED + "\n")
        return ["plot", name, "--metric", "loss"], None
    raise SystemExit(f"unknown case {case}")


CASES = ("logs-2g-sparse", "logs-2g-lines", "logs-n5-512m-line", "diagnose-512m-line", "diagnose-tqdm-100m",
         "logs-devzero", "attach-devzero", "ps-devzero-metrics", "plot-devzero-metrics", "ps-fifo-status",
         "logs-fifo-status", "attach-fifo-status", "plot-fifo-status", "diagnose-fifo-status", "logs-fifo-log",
         "diagnose-fifo-log", "plot-fifo-beat", "ps-nested-status", "plot-nested-metrics")
SMOKE = ("logs-2g-sparse", "logs-n5-512m-line", "logs-devzero", "ps-fifo-status", "ps-nested-status")


@dataclass
class Result:
    seconds: float
    peak_mb: float
    rc: int | None  # None: killed at the timeout
    tail: str
    traceback: bool = False


def measure(argv: list[str], env: dict, timeout: float, cap_mb: int | None, cwd: Path) -> Result:
    """Run ``argv`` (stdout to /dev/null): wall time, peak RSS, exit status, the end of stderr. Under GNU time
    where there is one: a child forked from this Python starts its ru_maxrss (os.wait4's) at this process's
    size, which GNU time's child does not. ``cwd`` outside any checkout: `python -m` imports from there first."""
    capped = ["prlimit", f"--as={cap_mb * MB}", "--", *argv] if cap_mb else argv
    with tempfile.NamedTemporaryFile() as rusage, tempfile.TemporaryFile() as err:
        timed = [TIME, "-f", "%e %M %x", "-o", rusage.name, *capped] if os.access(TIME, os.X_OK) else capped
        t0 = time.monotonic()
        proc = subprocess.Popen(timed, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env,
                                cwd=cwd, start_new_session=True)
        rc, usage = _wait(proc, timeout, via_time=timed is not capped)
        seconds = time.monotonic() - t0
        if timed is not capped:
            words = Path(rusage.name).read_text().split()
            rc, peak = (None if rc is None else int(words[-1])), int(words[-2]) / 1024
        else:
            peak = usage.ru_maxrss / 1024
        err.seek(0)
        text = err.read().decode(errors="replace")
        tail = [line for line in text.strip().splitlines() if not line.startswith("Command ")]
    return Result(seconds, peak, rc, tail[-1][:110] if tail else "", "Traceback" in text)


def _wait(proc: subprocess.Popen, timeout: float, via_time: bool):
    """(exit code or None when killed at the timeout, rusage). Under GNU time the command is killed, not
    time itself, so that time still reports."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage
        time.sleep(0.02)
    victims = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split() if via_time else [proc.pid]
    for pid in victims:
        os.kill(int(pid), signal.SIGKILL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return None, usage


def outcome(r: Result, timeout: float) -> str:
    if r.rc is None:
        return f"killed at the {timeout:.0f} s timeout"
    return f"exit {r.rc}" + (f": {r.tail}" if r.tail and r.rc not in (0,) else "")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, default=ROOT, help="the cockpit checkout to run")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--cap-mb", type=int, default=3072, help="address-space cap of each command")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--keep", type=Path, help="keep big generated files here between runs")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    sizes = Sizes(8 * MB, 8 * MB, 8 * MB, 4 * MB) if args.smoke else Sizes()
    cases = SMOKE if args.smoke else tuple(c for c in args.cases.split(",") if c)
    timeout = 20.0 if args.smoke else args.timeout
    tmp = Path(tempfile.mkdtemp(prefix="cockpit-bench-safety-"))
    scratch = args.keep or tmp
    print(f"cockpit from {args.root}; cap {args.cap_mb} MB address space, timeout {timeout:.0f} s")
    if not os.access(TIME, os.X_OK):
        print(f"(no GNU time at {TIME}: peak RSS by os.wait4, which counts this bench's own ~15 MB in)")
    print(f"{'case':<22} {'cockpit s':>9} {'peak MB':>8}  {'anchor s':>8} {'peak MB':>8}  outcome")
    bad = []
    try:
        for case in cases:
            runs = tmp / case
            runs.mkdir(mode=0o700)
            cwd = tmp / f"{case}-cwd"  # empty: a run id given as RUN is looked up, never found here
            cwd.mkdir()
            args_, anchor = build(case, runs, sizes, scratch)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "NO_COLOR": "1",
                   "PYTHONPATH": str(args.root), "COCKPIT_RUNS_DIR": str(runs), "COLUMNS": "100", "LINES": "30"}
            if anchor:  # warm the page cache first: the first read of a sparse file populates it (3 s per GiB)
                measure(anchor, env, timeout, None, cwd)
            r = measure([sys.executable, "-m", "cockpit", *args_], env, timeout, args.cap_mb, cwd)
            a = measure(anchor, env, timeout, None, cwd) if anchor else None
            anchor_cells = f"{a.seconds:>8.2f} {a.peak_mb:>8.1f}" if a else f"{'-':>8} {'-':>8}"
            print(f"{case:<22} {r.seconds:>9.2f} {r.peak_mb:>8.1f}  {anchor_cells}  {outcome(r, timeout)}",
                  flush=True)
            if r.rc is None or r.traceback:
                bad.append(case)
            shutil.rmtree(runs, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("safety: every case measured")
    if bad:
        print(f"hung or crashed: {', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
