"""The TUI under a log storm: 64 ranks writing 1,000 lines/s each into a run being viewed (merged view).

    python tests/bench/bench_tui.py [--ranks 64] [--rate 1000] [--warmup 15] [--keys 150] [--rounds 2]
                                    [--cols 120 --rows 36] [--baseline | --tui-only] [--json] [--smoke]
                                    [--metrics] [--charts | --on-charts]

Not collected by pytest (tests/bench is in norecursedirs). The TUI runs as a real process on a pseudo-terminal
(`python -m cockpit.tui --run RUN`), so what is measured is what a user gets: bytes in, bytes out.

- Keystroke-to-screen latency: the time from writing `f` (follow on/off) into the terminal until the run
  view's title line with the new word ("paused" / "follow") comes out of it. Presses are spaced 100-250 ms
  apart, after a warm-up long enough for every rank to have more than 10,000 lines (so the view's stores are
  full). Reported: p50, p90, p99, max.
- RSS of the TUI process (VmRSS, and VmHWM = peak) at the end, with 10,000 lines kept per rank, and of its
  child processes (the log feed process, cockpit.tui.models.feed_process, which holds the stores): "feed MB".

- A baseline beside it: by default the bench alternates (``--rounds``) sessions of a minimal textual app
  defined here (a title whose word changes on `f`, nothing else) and of the TUI, on the same pty harness and
  terminal size, each with the writer running, and prints both and the ratio TUI/baseline: the baseline is
  the floor of textual + the harness on this machine at the time. ``--baseline`` measures only it,
  ``--tui-only`` only the TUI. The baseline's warm-up is at most 3 s (it has no stores to fill).

The writer is another process: every 20 ms it appends rate/50 lines of ~100 bytes to each rank's log file
(and with ``--metrics`` a metrics record to each rank's metrics/rank-R.jsonl: 50 steps/s per rank, what the
side panel and the charts read). ``--charts`` (implies --metrics): before the key presses the TUI opens the
charts screen (`c`), waits for its first chart, and goes back (escape): the log view measured after it, and
the seconds from `c` to the chart ("charts s"); the charts' poll must leave nothing behind. ``--on-charts``:
the TUI stays on the charts screen and each key press is `m`, timed until the next chart's title is drawn
(the charts read the metrics files while the log feed goes on behind the screen).

Goals printed under the table (and in ``--json`` as ``figures``, ``goals`` and ``goals_met``, the shape of
tests/bench/benchkit.py): with ``--on-charts``, issue 29's p99 <= 50 ms from `m` to the next chart and RSS of the
TUI and its feed process together <= 150 MB. Issue 29's row:

    python tests/bench/bench_tui.py --on-charts --json
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

from cockpit.launch import procs  # noqa: E402
from cockpit.run.store import RunStatus, create_run_dir, write_status  # noqa: E402

HOSTS = 8
TICK = 0.02
GOAL_CHARTS_P99_MS = 50.0  # issue 29: `m` to the next chart, 64 ranks under a log storm
GOAL_CHARTS_RSS_MB = 150.0  # the TUI and its feed process together


def writer(run_dir: Path, ranks: int, rate: int, stop_after: float, metrics: bool = False) -> None:
    """Append to every rank's log at ``rate`` lines/s each until ``stop_after`` seconds (runs in a child); with
    ``metrics``, a metrics record per rank per tick too."""
    per_tick = max(1, int(rate * TICK))
    files = [open(run_dir / "logs" / f"rank-{r}.node{r % HOSTS}.log", "a", buffering=1 << 16)  # noqa: SIM115
             for r in range(ranks)]
    if metrics:
        (run_dir / "metrics").mkdir(exist_ok=True)
    records = [open(run_dir / "metrics" / f"rank-{r}.jsonl", "a") for r in range(ranks)] if metrics else []  # noqa: SIM115
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
        for r, f in enumerate(records):
            f.write(json.dumps({"step": tick + 1, "time": time.time(), "loss": 2.0 / (tick + 2), "rank": r}) + "\n")
            f.flush()
        tick += 1
        time.sleep(max(0.0, start + tick * TICK - time.monotonic()))
    for f in files + records:
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


# what each chart's title says, in the order `m` shows them (loss, rate, heat, wait, GPU): --on-charts waits
# for the next one's after each press
CHART_TITLES = ("loss per rank", "steps/s per rank", "per rank over time", "waiting in collectives", "no GPU data")


def rss_mb(pid: int) -> tuple[float, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def children_rss_mb(pid: int) -> float:
    """VmRSS of ``pid``'s child processes (the TUI's log feed), summed."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                total += rss_mb(int(stat.parent.name))[0]
        except (OSError, ValueError, KeyError):  # gone meanwhile, or a kernel thread without VmRSS
            continue
    return total


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def baseline_app() -> None:
    """The floor: a minimal textual app on the same pty whose only job is to swap a word of its title on `f`
    (no feed, no log, no tables). Run as ``bench_tui.py --baseline-app``; what it costs is textual + the
    harness on this machine, with the same writer loading it."""
    from textual.app import App
    from textual.widgets import Static

    class Baseline(App):
        CSS = "#title { height: 1; padding: 0 1; } #body { height: 1fr; }"
        BINDINGS = [("f", "toggle", "Follow"), ("q", "quit", "Quit")]

        def __init__(self) -> None:
            super().__init__()
            self.follow = True

        def compose(self):
            yield Static(self._text(), id="title", markup=False)
            yield Static("baseline: nothing else on screen", id="body")

        def _text(self) -> str:
            return "running · all ranks · all lines · " + ("follow" if self.follow else "paused")

        def action_toggle(self) -> None:
            self.follow = not self.follow
            self.query_one("#title", Static).update(self._text())

    Baseline().run()


def measure(kind: str, args: argparse.Namespace, keys: int) -> dict:
    """One session: a fresh run with its writer, ``kind`` ('tui' or 'baseline') on a pty, ``keys`` presses."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-tui-"))
    runs = tmp / "runs"
    warmup = args.warmup if kind == "tui" else min(args.warmup, 3.0)
    duration = warmup + keys * 0.5 + 60
    ctx = __import__("multiprocessing").get_context("fork")
    run_dir_holder = runs / "bench-20270101-000000-0001"
    runs.mkdir(parents=True)
    # the writer needs the run directory and the run needs the writer's pid (it stands in for a supervisor)
    read_end, write_end = os.pipe()
    proc = ctx.Process(target=_writer_after_go, args=(read_end, run_dir_holder, args.ranks, args.rate, duration,
                                                      args.metrics))
    proc.start()
    run_dir = make_run(runs, args.ranks, proc.pid)
    for r in range(args.ranks):
        (run_dir / "logs" / f"rank-{r}.node{r % HOSTS}.log").touch()
    env = {**os.environ, "COCKPIT_RUNS_DIR": str(runs), "XDG_CONFIG_HOME": str(tmp / "config"),
           "TERM": "xterm-256color", "COLUMNS": str(args.cols), "LINES": str(args.rows)}
    if kind == "baseline":
        argv = [sys.executable, str(Path(__file__).resolve()), "--baseline-app"]
    else:
        tui = os.environ.get("BENCH_TUI_ENTRY")  # e.g. a wrapper that times internals
        argv = [sys.executable, *([tui] if tui else ["-m", "cockpit.tui"]), "--run", str(run_dir),
                "--runs-dir", str(runs)]
    term = Terminal(argv, env, args.cols, args.rows)
    result: dict = {}
    try:
        if not term.wait_for("all ranks", 60):
            raise SystemExit(f"{kind}: the view did not open within 60 s")
        os.write(write_end, b"g")
        started = time.monotonic()
        if kind == "tui" and not term.wait_for("] [cockpit] step=", 30):
            raise SystemExit("no rank line reached the screen within 30 s")
        time.sleep(max(0.0, warmup - (time.monotonic() - started)))
        if kind == "tui" and args.charts:
            result["charts_s"] = term.press("c", " · loss · all ranks", 30)
            if result["charts_s"] is None or term.press("\x1b", " · follow", 30) is None:
                raise SystemExit("the charts screen did not open and close within 30 s")
        on_charts = kind == "tui" and args.on_charts
        if on_charts and term.press("c", "loss per rank", 30) is None:
            raise SystemExit("the charts screen did not open within 30 s")
        lat, lost, follow = [], 0, True
        for i in range(keys):
            time.sleep(random.uniform(0.1, 0.25))
            follow = not follow
            if on_charts:  # m: the next chart, drawn (its title on its way to the screen)
                got = term.press("m", CHART_TITLES[(i + 1) % len(CHART_TITLES)])
            else:
                got = term.press("f", " · follow" if follow else " · paused")
            if got is None:
                lost += 1
            else:
                lat.append(got * 1000)
        streamed = time.monotonic() - started
        rss, hwm = rss_mb(term.pid)
        feed_rss = children_rss_mb(term.pid)
        lines = sum(f.read_bytes().count(b"\n") for f in (run_dir / "logs").glob("rank-*.log"))
        result.update({
            "latencies_ms": lat, "keys_lost": lost, "streamed_s": streamed, "lines_written": lines,
            "rss_mb": round(rss, 1), "peak_rss_mb": round(hwm, 1), "feed_rss_mb": round(feed_rss, 1),
            "tty_bytes": term.bytes,
            "load_avg": os.getloadavg()[0],
        })
    finally:
        term.close()
        proc.terminate()
        proc.join(5)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return result


def summarize(sessions: list[dict], ranks: int) -> dict:
    lat = [x for s in sessions for x in s["latencies_ms"]]
    streamed = sum(s["streamed_s"] for s in sessions)
    lines = sum(s["lines_written"] for s in sessions)
    return {
        "sessions": len(sessions), "streamed_s": round(streamed, 1),
        "lines_per_s": round(lines / streamed) if streamed else 0,
        "lines_per_rank": max(s["lines_written"] for s in sessions) // ranks,
        "keys": len(lat), "keys_lost": sum(s["keys_lost"] for s in sessions),
        "latency_ms": {"p50": round(pct(lat, 50), 1), "p90": round(pct(lat, 90), 1),
                       "p99": round(pct(lat, 99), 1), "max": round(max(lat), 1),
                       "mean": round(statistics.mean(lat), 1)} if lat else None,
        "rss_mb": max(s["rss_mb"] for s in sessions), "peak_rss_mb": max(s["peak_rss_mb"] for s in sessions),
        "feed_rss_mb": max(s["feed_rss_mb"] for s in sessions),
        "tty_bytes": sum(s["tty_bytes"] for s in sessions),
        "load_avg": [round(s["load_avg"], 2) for s in sessions],
        "charts_s": [round(s["charts_s"], 2) for s in sessions if s.get("charts_s") is not None],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--rate", type=int, default=1000, help="lines/s per rank")
    p.add_argument("--warmup", type=float, default=15.0, help="seconds of streaming before the key presses")
    p.add_argument("--keys", type=int, default=150, help="key presses per measured app (split over the rounds)")
    p.add_argument("--rounds", type=int, default=2, help="baseline and TUI sessions, alternating")
    p.add_argument("--cols", type=int, default=120)
    p.add_argument("--rows", type=int, default=36)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--baseline", action="store_true", help="measure only the minimal textual app")
    mode.add_argument("--tui-only", action="store_true", help="measure only the TUI (no baseline)")
    p.add_argument("--baseline-app", action="store_true", help=argparse.SUPPRESS)  # the child of --baseline
    p.add_argument("--json", action="store_true")
    p.add_argument("--smoke", action="store_true", help="4 ranks, 4 keys, one round (the test suite's smoke test)")
    p.add_argument("--metrics", action="store_true", help="the writer appends metrics records too")
    p.add_argument("--charts", action="store_true", help="open the charts screen and go back before the keys")
    p.add_argument("--on-charts", action="store_true", help="stay on the charts screen: each key is m (the next "
                   "chart), timed until that chart is drawn")
    args = p.parse_args()
    args.metrics = args.metrics or args.charts or args.on_charts
    if args.smoke:
        args.ranks, args.rate, args.warmup, args.keys, args.rounds = 4, 50, 1.0, 4, 1
    if args.baseline_app:
        baseline_app()
        return 0

    kinds = ["baseline"] if args.baseline else ["tui"] if args.tui_only else ["baseline", "tui"]
    rounds = max(1, args.rounds)
    sessions: dict[str, list[dict]] = {k: [] for k in kinds}
    for r in range(rounds):
        for kind in kinds:
            keys = args.keys // rounds + (1 if r < args.keys % rounds else 0)
            sessions[kind].append(measure(kind, args, keys))
    result: dict = {"ranks": args.ranks, "rate_per_rank": args.rate, "terminal": f"{args.cols}x{args.rows}",
                    "rounds": rounds, "cores": os.cpu_count()}
    for kind in kinds:
        result[kind] = summarize(sessions[kind], args.ranks)
    if len(kinds) == 2 and result["baseline"]["latency_ms"] and result["tui"]["latency_ms"]:
        b, t = result["baseline"]["latency_ms"], result["tui"]["latency_ms"]
        result["ratio"] = {q: round(t[q] / b[q], 2) if b[q] else None for q in ("p50", "p90", "p99", "max", "mean")}
    goal_lines = goals(result, args)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{args.ranks} ranks x {args.rate} lines/s, {result['terminal']}, {rounds} round(s) "
          f"({' / '.join(kinds)} alternating), {os.cpu_count()} cores")
    print(f"{'':9} {'keys':>5} {'lost':>4} {'p50':>7} {'p90':>7} {'p99':>7} {'max':>7}  {'RSS MB':>7} "
          f"{'peak':>6} {'feed MB':>7}  load avg per session")
    for kind in kinds:
        r = result[kind]
        lat = r["latency_ms"] or {}
        print(f"{kind:9} {r['keys']:>5} {r['keys_lost']:>4} " + " ".join(f"{lat.get(q, 0):>7.1f}"
              for q in ("p50", "p90", "p99", "max")) + f"  {r['rss_mb']:>7.1f} {r['peak_rss_mb']:>6.1f} "
              f"{r['feed_rss_mb']:>7.1f}  "
              + " ".join(f"{x:.2f}" for x in r["load_avg"]))
    if "ratio" in result:
        print(f"{'tui/base':9} {'':>5} {'':>4} " + " ".join(f"{result['ratio'][q]:>6}x"
              for q in ("p50", "p90", "p99", "max")))
    if "tui" in result:
        t = result["tui"]
        print(f"TUI streamed {t['streamed_s']} s at {t['lines_per_s']:,} lines/s written "
              f"({t['lines_per_rank']:,} lines per rank at most)"
              + (f"; c to the first chart: {t['charts_s']} s" if t["charts_s"] else ""))
    print("\n".join(goal_lines))
    return 0


def goals(result: dict, args: argparse.Namespace) -> list[str]:
    """Issue 29's goals for the charts screen (``--on-charts``) into ``result`` (benchkit's shape); the lines
    to print."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import benchkit

    report = benchkit.Report("tui-charts" if args.on_charts else "tui")
    lines = []
    for kind in ("baseline", "tui"):
        if kind in result and result[kind]["latency_ms"]:
            r = result[kind]
            report.figure(kind, {"latency_ms": r["latency_ms"], "rss_mb": r["rss_mb"], "feed_rss_mb": r["feed_rss_mb"],
                                 "load_avg": r["load_avg"]})
    tui = result.get("tui")
    if args.on_charts and tui and tui["latency_ms"]:
        p99, rss = tui["latency_ms"]["p99"], tui["rss_mb"] + tui["feed_rss_mb"]
        lines.append(f"charts, m to the next chart: p99 {p99:.1f} ms: "
                     + report.goal("charts p99", f"<= {GOAL_CHARTS_P99_MS:g} ms", p99, p99 <= GOAL_CHARTS_P99_MS))
        lines.append(f"charts, RSS of the TUI + its feed: {rss:.0f} MB: "
                     + report.goal("charts RSS", f"<= {GOAL_CHARTS_RSS_MB:g} MB", round(rss, 1),
                                   rss <= GOAL_CHARTS_RSS_MB))
    d = report.as_dict()
    result.update({k: d[k] for k in ("figures", "goals", "goals_met", "command", "load")})
    return lines


def _writer_after_go(read_end: int, run_dir: Path, ranks: int, rate: int, duration: float, metrics: bool) -> None:
    os.read(read_end, 1)  # wait until the TUI shows the run
    writer(run_dir, ranks, rate, duration, metrics)


if __name__ == "__main__":
    sys.exit(main())
