"""Benchmark: what an ssh run's supervisor handles per look (a second: the watchdog's) from nodes that do not
share the run directory (issue 32's per-node aggregation): the node agent's `watch` asked as before (a line per
changed file) and batched (the round's files in one line per node), on stand-in ranks (tests/scale) of a local run
of many simulated hosts, 8 ranks a node by default. Not collected by pytest.

    python tests/bench/bench_node_watch.py --ranks 4096 [--nodes 512] [--sample 8] [--seconds 10] [--json]
    python tests/bench/bench_node_watch.py --smoke

For ``--sample`` hosts spread over the run, a node's view of it (a directory of hard links to that host's rank
files: the stand-ins append to the same inodes) is followed by two agents at once, one each way, started from the
files' sizes then (steady state, no history), run as the launcher runs them (`sh -c "python -c SOURCE watch
JSON"`). Their lines are kept, then replayed through the supervisor's handling (json.loads, file_messages,
write_chunk into a directory of their own), timed with this process's CPU clock. Per node per second, times the
nodes: the messages, bytes and handling CPU the supervisor has per look for the whole run. Not included: SSH
itself (asyncssh decrypting and splitting the lines: per byte, and per line), which the ssh arm of
bench_scale.py (--ssh --private) measures with the rest of the supervisor.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from scale import harness  # noqa: E402

from cockpit.launch.ssh.plan import NodePlan  # noqa: E402
from cockpit.launch.ssh.shell import agent_command  # noqa: E402
from cockpit.launch.ssh.stream import file_messages, watch_args, write_chunk  # noqa: E402

WAYS = ("per_file", "batched")


def node_view(run_dir: Path, host: str, ranks: list[int], to: Path) -> dict[str, int]:
    """``to`` as node ``host`` has its run directory: hard links to its ranks' files; their sizes now."""
    (to / "logs").mkdir(parents=True)
    (to / "metrics").mkdir()
    sizes = {}
    names = [f"logs/{p.name}" for p in (run_dir / "logs").iterdir() if f".{host}." in p.name and p.is_file()]
    names += [f"metrics/rank-{r}.jsonl" for r in ranks]
    for rel in names:
        os.link(run_dir / rel, to / rel)
        sizes[rel] = (to / rel).stat().st_size
    return sizes


class Agent:
    def __init__(self, view: Path, offsets: dict[str, int], batched: bool):
        args = watch_args(NodePlan("bench-node", 0, str(view), shared=False), os.getpid(), None, dict(offsets))
        if not batched:
            del args["batch"]
        self.offsets = dict(offsets)
        self.lines: list[str] = []
        self.proc = subprocess.Popen(["sh", "-c", agent_command(sys.executable, "watch", args)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)
        self.thread.join(30)


def handle(lines: list[str], here: Path, offsets: dict[str, int]) -> tuple[int, int, int, float]:
    """(lines with files, their bytes, file messages, CPU seconds) of handling ``lines`` as the supervisor does."""
    (here / "logs").mkdir(parents=True)
    began = time.process_time()
    count = size = ops = 0
    for line in lines:
        files = file_messages(json.loads(line))
        for one in files:
            write_chunk(here, False, offsets, one)
        if files:
            count, size, ops = count + 1, size + len(line), ops + len(files)
    return count, size, ops, time.process_time() - began


def measure(args: argparse.Namespace) -> dict:
    sim = harness.launch_local(args.ranks, args.nodes, stall_after=600)
    work = Path(tempfile.mkdtemp(prefix="cockpit-nodewatch-"))
    agents: dict[str, list[Agent]] = {w: [] for w in WAYS}
    try:
        sim.wait_stepping(600)
        time.sleep(3)  # past the start's burst
        per = args.ranks // args.nodes
        picked = sorted({k * args.nodes // args.sample for k in range(args.sample)})
        for k in picked:
            host = sim.hosts[k]
            sizes = node_view(sim.run_dir, host, list(range(k * per, (k + 1) * per)), work / host)
            for way in WAYS:
                agents[way].append(Agent(work / host, sizes, way == "batched"))
        began = time.monotonic()
        time.sleep(args.seconds)
        for way in WAYS:
            for a in agents[way]:
                a.close()
        took = time.monotonic() - began
        out: dict = {"ranks": args.ranks, "nodes": args.nodes, "ranks_per_node": per, "sampled_nodes": len(picked),
                     "seconds": round(took, 1), "load_avg": round(os.getloadavg()[0], 2)}
        for way in WAYS:
            tot = [0, 0, 0, 0.0]
            for i, a in enumerate(agents[way]):
                got = handle(a.lines, work / f"{way}-{i}", a.offsets)
                tot = [x + y for x, y in zip(tot, got, strict=True)]
            scale = args.nodes / (len(picked) * took)  # per node-second, times the nodes: the run's per look
            out[way] = {"messages_per_look": round(tot[0] * scale), "bytes_per_look": round(tot[1] * scale),
                        "files_per_look": round(tot[2] * scale),
                        "handling_cpu_pct": round(100 * tot[3] * scale, 1),
                        "messages_per_node_look": round(tot[0] / (len(picked) * took), 2)}
        b, p = out["batched"], out["per_file"]
        out["ratio"] = {k: round(b[k] / p[k], 3) if p[k] else None
                        for k in ("messages_per_look", "bytes_per_look", "handling_cpu_pct")}
        return out
    finally:
        for way in WAYS:
            for a in agents[way]:
                if a.proc.poll() is None:
                    a.proc.kill()
        harness.remove(sim)
        import shutil

        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=512)
    p.add_argument("--nodes", type=int, help="hosts (default ranks/8)")
    p.add_argument("--sample", type=int, default=8, help="nodes followed (each by two agents)")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--json", action="store_true")
    p.add_argument("--smoke", action="store_true", help="16 ranks on 2 nodes, 2 s: that it runs")
    args = p.parse_args()
    if args.smoke:
        args.ranks, args.nodes, args.sample, args.seconds = 16, 2, 2, 2.0
    args.nodes = args.nodes or max(1, args.ranks // 8)
    args.sample = min(args.sample, args.nodes)
    out = measure(args)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{out['ranks']} ranks on {out['nodes']} nodes ({out['ranks_per_node']} a node), {out['sampled_nodes']} "
              f"followed for {out['seconds']} s, load {out['load_avg']}")
        for way in WAYS:
            f = out[way]
            print(f"  {way:9} {f['messages_per_look']:>7} messages/look ({f['messages_per_node_look']} a node), "
                  f"{f['bytes_per_look']:>9} bytes, {f['files_per_look']:>6} file pieces, handling "
                  f"{f['handling_cpu_pct']}% of a core")
        print(f"  batched/per_file: {out['ratio']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
