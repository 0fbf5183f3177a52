"""The TUI under a log storm: 64 ranks writing 1,000 lines/s each into a run being viewed (merged view).

    python tests/bench/bench_tui.py [--ranks 64] [--rate 1000] [--warmup 15] [--keys 150] [--cols 120 --rows 36]

Not collected by pytest (tests/bench is in norecursedirs). The TUI runs as a real process on a pseudo-terminal
(`python -m cockpit.tui --run RUN`), so what is measured is what a user gets: bytes in, bytes out.

- Keystroke-to-screen latency: the time from writing `f` (follow on/off) into the terminal until the run
  view's title line with the new word ("paused" / "follow") comes out of it. Presses are spaced 100-250 ms
  apart, after a warm-up long enough for every rank to have more than 10,000 lines (so the view's stores are
  full). Reported: p50, p90, p99, max.
- RSS of the TUI process (VmRSS, and VmHWM = peak) at the end, with 10,000 lines kept per rank.

The writer is another process: every 20 ms it appends rate/50 lines of ~100 bytes to each rank's log file.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pty
import random
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from cockpit import procs  # noqa: E402
from cockpit.runs import RunStatus, create_run_dir, write_status  # noqa: E402

HOSTS = 8
TICK = 0.02


def writer(run_dir: Path, ranks: int, rate: int, stop_after: float) -> None:
    """Append to every rank's log at ``rate`` lines/s each until ``stop_after`` seconds (runs in a child)."""
    per_tick = max(1, int(rate * TICK))
    files = [open(run_dir / "logs" / f"rank-{r}.node{r % HOSTS}.log", "a", buffering=1 << 16)  # noqa: SIM115
             for r in range(ranks)]
    start = time.monotonic()
    seq, tick = 0, 0
    while time.monotonic() - start < stop_after:
        for r, f in enumerate(files):
            lines = []
            for _ in range(per_tick):
                seq += 1
                lines.append(f"[cockpit] step={seq // ranks} epoch=0 loss={random.random():.6f} samples/s=1791.8 "
                             f"rank={r} seq={seq} padding-to-a-realistic-length-of-a-line\n")
            f.write("".join(lines))
            f.flush()
        tick += 1
        time.sleep(max(0.0, start + tick * TICK - time.monotonic()))
    for f in files:
        f.close()


def make_run(runs: Path, ranks: int, writer_pid: int) -> Path:
    run_dir = create_run_dir(runs, "bench-20270101-000000-0001")
    status = RunStatus(run_id=run_dir.name, name="bench", launcher="local", job_file="/dev/null",
                       hosts=[f"node{h}" for h in range(HOSTS)], world_size=ranks, state="running",
                       started=time.time(), supervisor={"pid": writer_pid, "start": procs.start_time(writer_pid)})
    write_status(run_dir, status)
    return run_dir


class Terminal:
    """The TUI on a pty; a reader thread drains its output and time-stamps the arrival of awaited text."""

    def __init__(self, argv: list[str], env: dict, cols: int, rows: int):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execvpe(argv[0], argv, env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.lock = threading.Lock()
        self.tail = b""
        self.bytes = 0
        self.want: bytes | None = None
        self.seen = threading.Event()
        self.seen_at = 0.0
        self.alive = True
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while self.alive:
            ready, _, _ = select.select([self.fd], [], [], 0.5)
            if not ready:
                continue
            try:
                data = os.read(self.fd, 1 << 16)
            except OSError:
                return
            now = time.perf_counter()
            with self.lock:
                self.bytes += len(data)
                window = self.tail + data
                if self.want is not None and self.want in window:
                    self.want, self.seen_at = None, now
                    self.seen.set()
                self.tail = window[-4096:]

    def expect(self, text: str) -> None:
        with self.lock:
            self.want, self.tail = text.encode(), b""
            self.seen.clear()

    def press(self, key: str, text: str, timeout: float = 10.0) -> float | None:
        """Send ``key``; seconds until ``text`` is on its way to the screen (None: not within timeout)."""
        self.expect(text)
        sent = time.perf_counter()
        os.write(self.fd, key.encode())
        if not self.seen.wait(timeout):
            return None
        return self.seen_at - sent

    def wait_for(self, text: str, timeout: float) -> bool:
        self.expect(text)
        return self.seen.wait(timeout)

    def close(self) -> None:
        """Quit as a user would (q), then make sure."""
        with contextlib.suppress(OSError):
            os.write(self.fd, b"q")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and os.waitpid(self.pid, os.WNOHANG) == (0, 0):
            time.sleep(0.1)
        self.alive = False
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)


def rss_mb(pid: int) -> tuple[float, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--rate", type=int, default=1000, help="lines/s per rank")
    p.add_argument("--warmup", type=float, default=15.0, help="seconds of streaming before the key presses")
    p.add_argument("--keys", type=int, default=150)
    p.add_argument("--cols", type=int, default=120)
    p.add_argument("--rows", type=int, default=36)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-tui-"))
    runs = tmp / "runs"
    duration = args.warmup + args.keys * 0.5 + 60
    ctx = __import__("multiprocessing").get_context("fork")
    run_dir_holder = runs / "bench-20270101-000000-0001"
    runs.mkdir(parents=True)
    # the writer needs the run directory and the run needs the writer's pid (it stands in for a supervisor)
    read_end, write_end = os.pipe()
    proc = ctx.Process(target=_writer_after_go, args=(read_end, run_dir_holder, args.ranks, args.rate, duration))
    proc.start()
    run_dir = make_run(runs, args.ranks, proc.pid)
    for r in range(args.ranks):
        (run_dir / "logs" / f"rank-{r}.node{r % HOSTS}.log").touch()
    env = {**os.environ, "COCKPIT_RUNS_DIR": str(runs), "XDG_CONFIG_HOME": str(tmp / "config"),
           "TERM": "xterm-256color", "COLUMNS": str(args.cols), "LINES": str(args.rows)}
    tui = os.environ.get("BENCH_TUI_ENTRY")  # e.g. a wrapper that times internals
    argv = [sys.executable, *([tui] if tui else ["-m", "cockpit.tui"]), "--run", str(run_dir), "--runs-dir", str(runs)]
    term = Terminal(argv, env, args.cols, args.rows)
    result: dict = {"ranks": args.ranks, "rate_per_rank": args.rate, "terminal": f"{args.cols}x{args.rows}"}
    try:
        if not term.wait_for("all ranks", 60):
            raise SystemExit("the run view did not open within 60 s")
        os.write(write_end, b"g")
        started = time.monotonic()
        if not term.wait_for("] [cockpit] step=", 30):
            raise SystemExit("no rank line reached the screen within 30 s")
        time.sleep(max(0.0, args.warmup - (time.monotonic() - started)))
        lat, lost, follow = [], 0, True
        for _ in range(args.keys):
            time.sleep(random.uniform(0.1, 0.25))
            follow = not follow
            got = term.press("f", " · follow" if follow else " · paused")
            if got is None:
                lost += 1
            else:
                lat.append(got * 1000)
        streamed = time.monotonic() - started
        rss, hwm = rss_mb(term.pid)
        lines = sum(f.read_bytes().count(b"\n") for f in (run_dir / "logs").glob("rank-*.log"))
        result.update({
            "streamed_s": round(streamed, 1), "lines_written": lines,
            "lines_per_s": round(lines / streamed), "lines_per_rank": lines // args.ranks,
            "keys": len(lat), "keys_lost": lost,
            "latency_ms": {"p50": round(pct(lat, 50), 1), "p90": round(pct(lat, 90), 1),
                           "p99": round(pct(lat, 99), 1), "max": round(max(lat), 1),
                           "mean": round(statistics.mean(lat), 1)} if lat else None,
            "rss_mb": round(rss, 1), "peak_rss_mb": round(hwm, 1), "tty_bytes": term.bytes,
            "load_avg": os.getloadavg()[0],
        })
    finally:
        term.close()
        proc.terminate()
        proc.join(5)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        lat = result.get("latency_ms") or {}
        print(f"{args.ranks} ranks x {args.rate} lines/s, {result['lines_per_s']:,} lines/s written for "
              f"{result['streamed_s']} s ({result['lines_per_rank']:,} lines per rank), {result['terminal']}")
        print(f"keystroke-to-screen over {result['keys']} presses ({result['keys_lost']} lost): p50 "
              f"{lat.get('p50')} ms  p90 {lat.get('p90')} ms  p99 {lat.get('p99')} ms  max {lat.get('max')} ms")
        print(f"TUI RSS {result['rss_mb']} MB (peak {result['peak_rss_mb']} MB); load average "
              f"{result['load_avg']:.1f} on {os.cpu_count()} cores")
    return 0


def _writer_after_go(read_end: int, run_dir: Path, ranks: int, rate: int, duration: float) -> None:
    os.read(read_end, 1)  # wait until the TUI shows the run
    writer(run_dir, ranks, rate, duration)


if __name__ == "__main__":
    sys.exit(main())
