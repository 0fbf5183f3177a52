"""Benchmark: cockpit's live side at scale (issue 32), on a run of stand-in ranks (tests/scale) through the real
supervisor, watchdog and commands (not collected by pytest).

    python tests/bench/bench_scale.py --ranks 4096 [--nodes 512] [--json]   # a local run of 512 simulated hosts
    flock /tmp/cockpit-heavy.lock python tests/bench/bench_scale.py --ranks 512 --nodes 4 --ssh
    flock /tmp/cockpit-heavy.lock python tests/bench/bench_scale.py --ranks 512 --nodes 4 --ssh --private \
        --only steady                                 # every rank's files come back over SSH
    python tests/bench/bench_scale.py --smoke                               # 8 ranks, 2 hosts, seconds
    python tests/bench/bench_scale.py --ranks 4096 --only steady,ps,stall   # the live side alone (no TUI, logs -f)

Each rank writes 1 progress line/s (its log), a beat/s and a metrics record/s, as a real rank does under cockpit.
``--nodes`` defaults to ranks/8 (8 GPUs a node). Without ``--ssh`` the run is local, widened to the simulated
hosts (tests/scale/harness.py says what that does and does not have); ``--ssh`` runs over that many
network-namespace nodes (tests/scale/sshlab.py; root, and the heavy-test lock), which see the run directory here
unless ``--private`` (then the supervisor copies every rank's files from its node's agent). In order, one at a
time:

1. steady state, 10 s after every rank is watched: the supervisor's CPU (% of one core) and RSS; the stand-ins'
   own CPU (the harness's cost, on the same two cores) and the load average (also taken before anything starts:
   the machine's other work, and at the end);
2. `cockpit ps` (table) and `ps --json`: median seconds of 5, and the client's peak RSS;
3. `cockpit stacks RUN` (text) and `--json` on the healthy run: seconds, ranks answered, lines of text; "folded"
   means the text of a run whose ranks share one stack is at most FOLDED_LINES lines (today: a dump per rank);
4. `cockpit logs -f RUN` (it prints the run's lines so far, then follows), started about 25 s into the run at
   every size, for ``--window`` s; then the ranks stop writing lines (they go on stepping, so nothing stalls)
   until it has shown every line written (at most 120 s: "drain"), then Ctrl-C. Every line written must be
   shown exactly once; lines are stamped, so the lag from write to shown of each line written after it
   started is measured too; "keeps up" means nothing lost and lag p99 under a second (a line a second);
5. the TUI (`python -m cockpit.tui --run RUN` on a pty, bench_tui's harness), next: seconds until the run's
   title and a rank's line are drawn, then ``--keys`` presses of `f`, each timed until the title shows the
   change; peak RSS of the TUI and its log feed. ``history``: the lines the run had when each viewer started;
6. stall detection: one rank told to hang (the others wait in all_reduce), ``--stalls`` times: from the last
   line any rank wrote (the logs' newest mtime) to the stall finding in status.json, minus stall_after (as
   bench_hang); the culprit must be that rank alone; then the rank resumes. The 8-rank figure it is compared
   with is measured first, on an 8-rank run of the same kind (``--ref-stall S`` gives it instead);
7. the supervisor's peak RSS over the whole run (VmHWM, the stall's stack gathering included); then every
   rank is told to end, and the run must succeed.

Goals (issue 32, at 4,096 ranks / 512 nodes): stall detection within 2 s of the 8-rank figure; stacks folded in
<= 5 s; ps <= 0.5 s; logs -f keeps up, nothing lost; TUI open <= 2 s, key p99 <= 50 ms; supervisor <= 5% of a
core and <= 200 MB; clients <= 300 MB. Growth is judged across sizes (run it at 8, 512 and 4,096).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "bench")]

from bench_tui import Terminal, children_rss_mb, pct, rss_mb  # noqa: E402
from scale import harness  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
FOLDED_LINES = 50
STAGES = ("steady", "ps", "stacks", "logs_follow", "tui", "stall")
STAMP = re.compile(r"^\[([^:\]]+):(\d+)\] \[cockpit\] step=\d+ .* seq=(\d+) t=(\d+)$")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def standin_pids(sim: harness.Sim) -> list[int]:
    """The stand-ins, as this machine numbers them (an ssh node's pid files hold its own PID namespace's)."""
    mine = []
    for pid in harness.run_pids(sim.run_id):
        try:
            if str(harness.STANDIN).encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                mine.append(pid)
        except OSError:
            continue  # ended meanwhile
    return mine


def timed(sim: harness.Sim, *args: str) -> dict:
    """A cockpit command: seconds, exit code, peak RSS (MB), stdout."""
    with tempfile.TemporaryFile() as err:
        began = time.perf_counter()
        proc = sim.popen(*args, stdout=subprocess.PIPE, stderr=err)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        took = time.perf_counter() - began
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return {"s": took, "rc": proc.returncode, "rss_mb": usage.ru_maxrss / 1024, "out": out.decode(),
                "err": err.read().decode()[-500:]}


def steady(sim: harness.Sim, seconds: float) -> dict:
    pids = standin_pids(sim)
    before = cpu_seconds(sim.supervisor), sum(map(cpu_seconds, pids))
    time.sleep(seconds)
    after = cpu_seconds(sim.supervisor), sum(map(cpu_seconds, pids))
    rss, _ = rss_mb(sim.supervisor)
    return {"supervisor_cpu_pct": round(100 * (after[0] - before[0]) / seconds, 1),
            "supervisor_rss_mb": round(rss, 1), "standins": len(pids),
            "standins_cpu_pct": round(100 * (after[1] - before[1]) / seconds, 1),
            "load_avg": round(os.getloadavg()[0], 2)}


def ps(sim: harness.Sim, times: int = 5) -> dict:
    table = [timed(sim, "ps") for _ in range(times)]
    as_json = [timed(sim, "ps", "--json") for _ in range(times)]
    [run] = json.loads(as_json[-1]["out"])["runs"]
    return {"s": round(statistics.median(r["s"] for r in table), 3),
            "json_s": round(statistics.median(r["s"] for r in as_json), 3),
            "ranks_seen": len(run.get("progress") or {}), "rss_mb": round(max(r["rss_mb"] for r in table + as_json), 1)}


def stacks(sim: harness.Sim) -> dict:
    text = timed(sim, "stacks", sim.run_id, "--timeout", "60")
    js = timed(sim, "stacks", sim.run_id, "--timeout", "60", "--json")
    answered = sum(r["answered"] for r in json.loads(js["out"])["ranks"]) if js["rc"] == 0 else 0
    lines = text["out"].count("\n")
    return {"s": round(text["s"], 2), "json_s": round(js["s"], 2), "answered": answered, "lines": lines,
            "folded": lines <= FOLDED_LINES, "rss_mb": round(max(text["rss_mb"], js["rss_mb"]), 1)}


def newest_log_write(sim: harness.Sim) -> float:
    return max(p.stat().st_mtime for p in (sim.run_dir / "logs").glob("rank-*.log"))


def one_stall(sim: harness.Sim, rank: int, stall_after: float) -> dict:
    sim.hang(rank)
    found, seen = None, None
    deadline = time.monotonic() + stall_after + 120
    while found is None and time.monotonic() < deadline:
        stamp = (sim.run_dir / "status.json").stat().st_mtime_ns
        if stamp != seen:  # parse status.json (1 MB at 4,096 ranks) only when it changed
            seen, found = stamp, sim.finding("stall")
        if found is None:
            time.sleep(0.05)
    at = time.time()
    if found is None:
        raise SystemExit(f"no stall finding within {stall_after + 120:g} s")
    delay = at - newest_log_write(sim) - stall_after
    alone = [c["rank"] for c in found["culprits"]] == [rank]
    sim.resume()
    harness.until(lambda: not sim.finding("stall"), 120, "the stall finding to clear", every=0.5)
    return {"s": round(delay, 2), "named_alone": alone}


def stalls(sim: harness.Sim, times: int, stall_after: float) -> dict:
    got = [one_stall(sim, sim.ranks * 3 // 4 + 1 if sim.ranks > 1 else 0, stall_after) for _ in range(times)]
    return {"s": round(statistics.median(g["s"] for g in got), 2), "max_s": max(g["s"] for g in got),
            "named_alone": all(g["named_alone"] for g in got), "stall_after": stall_after}


def reference_stall(args: argparse.Namespace) -> float:
    """The 8-rank figure, on a fresh 8-rank run of the same kind."""
    sim = launch(args, 8, 1 if not args.ssh else len(args.lab.hosts))
    try:
        sim.wait_up(120)
        return stalls(sim, args.stalls, args.stall_after)["s"]
    finally:
        harness.remove(sim)


def tui(sim: harness.Sim, keys: int) -> dict:
    argv = [sys.executable, "-m", "cockpit.tui", "--run", str(sim.run_dir), "--runs-dir", str(sim.runs)]
    env = {**sim.env, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "36"}
    history = sim.ranks * sim.clock()
    began = time.perf_counter()
    term = Terminal(argv, env, 120, 36)
    try:
        if not term.wait_for(f"running · {sim.status()['launcher']}", 120):
            raise SystemExit("the TUI did not show the run within 120 s")
        title_s = time.perf_counter() - began
        if not term.wait_for("] [cockpit] step=", 120):
            raise SystemExit("no rank line reached the TUI's screen within 120 s")
        open_s = time.perf_counter() - began
        lat, lost, follow = [], 0, True
        for _ in range(keys):
            time.sleep(0.15)
            follow = not follow
            got = term.press("f", " · follow" if follow else " · paused")
            lost += got is None
            lat += [] if got is None else [got * 1000]
        rss = rss_mb(term.pid)[1] + children_rss_mb(term.pid)
    finally:
        term.close()
    return {"history": history, "title_s": round(title_s, 2), "open_s": round(open_s, 2), "keys": len(lat),
            "keys_lost": lost,
            "key_p50_ms": round(pct(lat, 50), 1) if lat else None,
            "key_p90_ms": round(pct(lat, 90), 1) if lat else None,
            "key_p99_ms": round(pct(lat, 99), 1) if lat else None, "rss_mb": round(rss, 1)}


def follow(sim: harness.Sim, window: float) -> dict:
    """logs -f for ``window`` s; then the ranks stop writing lines (they go on stepping, so nothing stalls)
    until it has shown every line written, or 120 s; then Ctrl-C (a viewer detaches) and the ranks write again.
    Every stamped line counted; the lag of each written after logs -f started, timed."""
    shown: dict[tuple[int, int], int] = {}
    lags: list[float] = []  # of the lines written after logs -f started (the ones before are its catch-up)
    since, history = time.time_ns(), sim.ranks * sim.clock()
    proc = sim.popen("logs", "-f", sim.run_id, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def read() -> None:
        for raw in proc.stdout:
            now = time.time_ns()
            m = STAMP.match(raw.decode(errors="replace").rstrip("\n"))
            if m:
                key = (int(m.group(2)), int(m.group(3)))
                shown[key] = shown.get(key, 0) + 1
                if int(m.group(4)) >= since:
                    lags.append((now - int(m.group(4))) / 1e9)

    reader = threading.Thread(target=read, daemon=True)
    began = time.perf_counter()
    reader.start()
    time.sleep(window)
    sim.tell(rate=0)
    time.sleep(2 * sim.step_s)  # every process has read it: no line is written any more
    written = {(int(r), int(s)) for path in (sim.run_dir / "logs").glob("rank-*.log")
               for r, s in re.findall(r" rank=(\d+) seq=(\d+) t=", path.read_text())}
    drained = time.monotonic()
    while not written <= shown.keys() and time.monotonic() - drained < 120:
        time.sleep(0.2)
    drain_s = time.monotonic() - drained
    proc.send_signal(signal.SIGINT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join(30)
    sim.tell(rate=1)
    lost = len(written - set(shown))
    dup = sum(n - 1 for n in shown.values() if n > 1)
    p99 = pct(lags, 99) if lags else None
    return {"rc": proc.returncode, "history": history, "written": len(written), "shown": len(shown), "lost": lost,
            "duplicated": dup, "drain_s": round(drain_s, 2),
            "lag_p50_s": round(pct(lags, 50), 3) if lags else None, "lag_p99_s": round(p99, 3) if lags else None,
            "cpu_pct": round(100 * (usage.ru_utime + usage.ru_stime) / wall, 1),
            "rss_mb": round(usage.ru_maxrss / 1024, 1),
            "keeps_up": lost == 0 and dup == 0 and p99 is not None and p99 < 1.0}


def launch(args: argparse.Namespace, ranks: int, nodes: int) -> harness.Sim:
    if args.ssh:
        from scale.sshlab import launch_ssh

        return launch_ssh(args.lab, ranks, stall_after=args.stall_after, grace=5)
    return harness.launch_local(ranks, nodes, stall_after=args.stall_after, grace=5)


def measure(args: argparse.Namespace) -> dict:
    before = round(os.getloadavg()[0], 2)  # the machine's load before any stand-in runs (others' work)
    ref = args.ref_stall if args.ref_stall is not None else (
        reference_stall(args) if args.ranks != 8 and "stall" in args.only else None)
    began = time.perf_counter()
    sim = launch(args, args.ranks, args.nodes)
    launched = ("ssh, private" if args.private else "ssh") if args.ssh else "local"
    figures: dict = {"ranks": args.ranks, "nodes": args.nodes, "launch": launched,
                     "cores": os.cpu_count(), "load_avg_start": before}
    try:
        sim.wait_up(600)
        figures["watched_after_s"] = round(time.perf_counter() - began, 1)
        time.sleep(3)  # past the start's burst
        while sim.clock() < args.age:  # --age: the history a viewer opens (the full run reaches its TUI at ~60 s)
            time.sleep(0.5)
        for name, take in (("steady", lambda: steady(sim, args.steady)), ("ps", lambda: ps(sim)),
                           ("stacks", lambda: stacks(sim)), ("logs_follow", lambda: follow(sim, args.window)),
                           ("tui", lambda: tui(sim, args.keys)),
                           ("stall", lambda: stalls(sim, args.stalls, args.stall_after))):
            if name not in args.only:
                continue
            figures[name] = take()
            # each figure as it comes, on stderr: a later stage that fails (at 4,096 ranks, after minutes)
            # leaves the ones before it
            print(f"bench_scale: {name}: {json.dumps(figures[name])} (load {os.getloadavg()[0]:.2f})",
                  file=sys.stderr, flush=True)
        if "stall" in figures:
            figures["stall"]["ref_8_ranks_s"] = figures["stall"]["s"] if ref is None else ref
        figures["supervisor_peak_rss_mb"] = round(rss_mb(sim.supervisor)[1], 1)
        sim.end()
        figures["state"] = sim.wait_final(300)["state"]
        figures["load_avg_end"] = round(os.getloadavg()[0], 2)
    finally:
        harness.remove(sim)
    return figures


def goals(f: dict) -> dict[str, tuple[str, bool]]:
    """Each goal of issue 32 whose figures were measured (``--only``): (what it asks, met)."""
    return {k: v for k, v in all_goals(f).items() if all(stage in f for stage in _NEEDS[k])}


_NEEDS = {"stall": ("stall",), "stacks": ("stacks",), "ps": ("ps",), "logs_follow": ("logs_follow",),
          "tui_open": ("tui",), "tui_keys": ("tui",), "supervisor_cpu": ("steady",), "supervisor_rss": ("steady",),
          "client_rss": ("ps", "stacks", "logs_follow", "tui")}


def all_goals(f: dict) -> dict[str, tuple[str, bool]]:
    st, tu, sup = (f.get(k, {}) for k in ("stall", "tui", "steady"))
    clients = max([f[k]["rss_mb"] for k in ("ps", "stacks", "logs_follow", "tui") if k in f] or [0.0])
    f["client_rss_mb"] = clients
    return {
        "stall": (f"within 2 s of the 8-rank figure ({st.get('ref_8_ranks_s')} s), culprit named alone",
                  bool(st) and st["s"] <= st["ref_8_ranks_s"] + 2 and st["named_alone"]),
        "stacks": ("folded, <= 5 s, every rank answered", "stacks" in f and f["stacks"]["folded"] and
                   f["stacks"]["s"] <= 5 and f["stacks"]["answered"] == f["ranks"]),
        "ps": ("<= 0.5 s", "ps" in f and f["ps"]["s"] <= 0.5),
        "logs_follow": ("keeps up (lag p99 < 1 s), nothing lost", "logs_follow" in f and f["logs_follow"]["keeps_up"]),
        "tui_open": ("<= 2 s", bool(tu) and tu["open_s"] <= 2),
        "tui_keys": ("p99 <= 50 ms", bool(tu) and tu["key_p99_ms"] is not None and tu["key_p99_ms"] <= 50 and
                     not tu["keys_lost"]),
        "supervisor_cpu": ("<= 5% of a core", bool(sup) and sup["supervisor_cpu_pct"] <= 5),
        "supervisor_rss": ("<= 200 MB", f["supervisor_peak_rss_mb"] <= 200),
        "client_rss": ("<= 300 MB", clients <= 300),
    }


def report(f: dict, met: dict) -> None:
    st, lf, tu, sup = (f.get(k, {}) for k in ("stall", "logs_follow", "tui", "steady"))
    rows = [
        ("stall detection", lambda: f"{st['s']} s beyond stall_after {st['stall_after']:g} s (max {st['max_s']}; "
                                    f"8 ranks: {st['ref_8_ranks_s']} s); named alone: {st['named_alone']}", "stall"),
        ("cockpit stacks", lambda: f"{f['stacks']['s']} s text, {f['stacks']['json_s']} s --json; "
                                   f"{f['stacks']['answered']}/{f['ranks']} answered; {f['stacks']['lines']} lines "
                                   f"({'folded' if f['stacks']['folded'] else 'not folded'})", "stacks"),
        ("cockpit ps", lambda: f"{f['ps']['s']} s (--json {f['ps']['json_s']} s, {f['ps']['ranks_seen']} ranks)",
         "ps"),
        ("logs -f", lambda: f"{lf['shown']}/{lf['written']} lines, {lf['lost']} lost, {lf['duplicated']} twice; lag "
                            f"p50 {lf['lag_p50_s']} s p99 {lf['lag_p99_s']} s; {lf['cpu_pct']}% CPU", "logs_follow"),
        ("TUI open", lambda: f"{tu['open_s']} s (title {tu['title_s']} s)", "tui_open"),
        ("TUI keys", lambda: f"p50 {tu['key_p50_ms']} ms p99 {tu['key_p99_ms']} ms ({tu['keys']} keys, "
                             f"{tu['keys_lost']} lost)", "tui_keys"),
        ("supervisor CPU", lambda: f"{sup['supervisor_cpu_pct']}% of a core (stand-ins: {sup['standins_cpu_pct']}% "
                                   f"in {sup['standins']} processes)", "supervisor_cpu"),
        ("supervisor RSS", lambda: f"{sup['supervisor_rss_mb']} MB steady, {f['supervisor_peak_rss_mb']} MB peak",
         "supervisor_rss"),
        ("client RSS", lambda: f"{f['client_rss_mb']} MB (ps {f['ps']['rss_mb']}, stacks {f['stacks']['rss_mb']}, "
                               f"logs -f {lf['rss_mb']}, TUI {tu['rss_mb']})", "client_rss"),
    ]
    print(f"{f['ranks']} ranks on {f['nodes']} nodes ({f['launch']}), {f['cores']} cores, load "
          f"{f['load_avg_start']} -> {sup.get('load_avg')} (steady) -> {f['load_avg_end']}; watched after "
          f"{f['watched_after_s']} s")
    for name, value, key in rows:
        if key not in met:
            continue  # not measured (--only)
        goal, ok = met[key]
        print(f"  {name:15} {value()}\n  {'':15} goal: {goal}: {'met' if ok else 'NOT met'}")
    print(f"goals met: {'yes' if all(ok for _, ok in met.values()) else 'no'}")


def _interrupted(signum: int, _frame) -> None:
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=512)
    p.add_argument("--nodes", type=int, help="hosts (default ranks/8); with --ssh, namespaced nodes (default 4)")
    p.add_argument("--ssh", action="store_true", help="over ssh to network-namespace nodes (root; take the lock)")
    p.add_argument("--private", action="store_true", help="with --ssh: the nodes do not share the run directory, "
                   "every rank's files come back over SSH")
    p.add_argument("--json", action="store_true")
    p.add_argument("--smoke", action="store_true", help="8 ranks on 2 hosts, short: that it runs")
    p.add_argument("--stall-after", type=float, default=5.0)
    p.add_argument("--stalls", type=int, default=2)
    p.add_argument("--ref-stall", type=float, help="the 8-rank stall figure (seconds), instead of measuring it")
    p.add_argument("--steady", type=float, default=10.0, help="seconds of steady state measured")
    p.add_argument("--keys", type=int, default=40)
    p.add_argument("--window", type=float, default=20.0, help="seconds of logs -f before the run ends")
    p.add_argument("--age", type=float, default=0.0, help="seconds of run before the first stage (with --only)")
    p.add_argument("--only", default=",".join(STAGES), help=f"the stages measured, comma-separated (default: all "
                   f"of {','.join(STAGES)}); goals_met covers those")
    args = p.parse_args()
    # a bench stopped by SIGTERM or SIGHUP (timeout(1), a closed terminal) stops its run too: the finally blocks
    # below end the supervisor and the stand-ins, which otherwise outlive it (512 processes at 4,096 ranks)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupted)
    if args.smoke:
        args.ranks, args.nodes, args.stall_after, args.stalls, args.steady, args.keys, args.window = (
            8, 2, 2.0, 1, 2.0, 4, 3.0)
    args.only = [w for w in args.only.split(",") if w]
    if not args.only or set(args.only) - set(STAGES):
        p.error(f"--only: give some of {','.join(STAGES)}")
    if args.private and not args.ssh:
        p.error("--private: with --ssh only")
    args.nodes = args.nodes or (4 if args.ssh else max(1, args.ranks // 8))
    args.stall_after = int(args.stall_after)  # the job file's stall_after: whole seconds
    args.lab = None
    if args.ssh:
        from scale.sshlab import make_lab

        args.lab = make_lab(args.nodes, private=args.private)
    try:
        figures = measure(args)
    finally:
        if args.lab is not None:
            args.lab.close()
    met = goals(figures)
    result = {"figures": figures, "goals": {k: {"goal": g, "met": ok} for k, (g, ok) in met.items()},
              "goals_met": all(ok for _, ok in met.values())}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        report(figures, met)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt as stop:
        print(f"bench_scale: {stop or 'interrupted'}; its run was stopped", file=sys.stderr)
        sys.exit(130)
