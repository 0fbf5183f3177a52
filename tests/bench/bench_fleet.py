"""Benchmark a fleet refresh round over N SSH nodes (loopback addresses 127.0.1.1 ... 127.0.1.N, one private
sshd bound to 0.0.0.0 with AllowUsers cockpit-test@127.0.0.0/8), side by side:

  ssh           one `ssh NODE hostname` per node, all in parallel (a new connection each)
  ssh-cm        the same through a warm ControlMaster per node (a new session on a shared connection)
  cockpit-run   cockpit.remote: `hostname` on cockpit's persistent asyncssh connection per node
  cockpit       cockpit.fleet.probes's refresh while watching: one line on each node's open probe channel, until every
                node has sent a fresh report (GPUs, interfaces, ports): what `cockpit gpus --watch` pays

Median (and p90) of --rounds rounds each, for each N. Then the CPU cockpit's own process uses while watching
the largest N at 1 Hz (user+sys over --cpu-seconds, % of one core), and the nodes' probes' CPU beside it (on a
real cluster that is spread over the nodes; here all of it lands on this machine).

    python tests/bench/bench_fleet.py [--nodes 8 32 64] [--rounds 20] [--cpu-seconds 20] [--smoke]

Needs root (starts sshd, creates the user cockpit-test) and openssh-server + openssh-client. Traffic stays on
127.0.0.0/8. Not collected by pytest (tests/bench is in norecursedirs).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for fleet.sshd

from fleet.sshd import Sshd, descendants, free_port, make_world  # noqa: E402

from cockpit.fleet.probes import Fleet  # noqa: E402
from cockpit.remote import RemotePool, SSHOptions  # noqa: E402


def addresses(n: int) -> list[str]:
    return [f"127.0.1.{i}" for i in range(1, n + 1)]


def ssh_round(hosts: list[str], config: Path, control: Path | None) -> float:
    argv = ["ssh", "-F", str(config), "-o", "BatchMode=yes"]
    if control is not None:
        argv += ["-o", "ControlMaster=auto", "-o", f"ControlPath={control}/%h", "-o", "ControlPersist=600"]
    t0 = time.perf_counter()
    procs = [subprocess.Popen([*argv, h, "hostname"], stdout=subprocess.PIPE, stderr=subprocess.PIPE) for h in hosts]
    outs = [p.communicate() for p in procs]
    took = time.perf_counter() - t0
    bad = [(h, p.returncode, e[-200:]) for h, p, (_, e) in zip(hosts, procs, outs, strict=True) if p.returncode]
    if bad:
        raise SystemExit(f"ssh failed: {bad[:3]}")
    return took


def stats(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


async def cockpit_rounds(hosts: list[str], options: SSHOptions, python: str, rounds: int) -> dict[str, list[float]]:
    pool = RemotePool(options)
    await asyncio.gather(*(pool.get(h).run("true", 30) for h in hosts))  # connect first: measure warm rounds
    run_times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        results = await asyncio.gather(*(pool.get(h).run("hostname", 30) for h in hosts))
        run_times.append(time.perf_counter() - t0)
        assert all(r.ok for r in results)
    fleet = Fleet(hosts, pool, python=python, timeout=30)
    fleet.start(3600)  # no periodic reports: every report in a round is the answer to that round's poke
    await fleet.refresh_now(60)
    refresh_times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        since = time.time()
        nodes = await fleet.refresh_now(30)
        refresh_times.append(time.perf_counter() - t0)
        late = [n.host for n in nodes if (n.updated or 0) < since]
        assert not late, f"no fresh report from {late[:3]}"
    await fleet.stop()
    return {"cockpit-run": run_times, "cockpit": refresh_times}


async def watch_cpu(hosts: list[str], options: SSHOptions, python: str, seconds: float, sshd: Sshd) -> tuple:
    fleet = Fleet(hosts, RemotePool(options), python=python, timeout=30)
    fleet.start(1.0)
    await fleet.refresh_now(60)
    await asyncio.sleep(2)  # settle
    nodes_before = node_cpu(sshd)
    before = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    seen_before = {h: n.updated for h, n in fleet.nodes.items()}
    await asyncio.sleep(seconds)
    after = resource.getrusage(resource.RUSAGE_SELF)
    wall = time.perf_counter() - t0
    nodes_after = node_cpu(sshd)
    fresh = sum(1 for h, n in fleet.nodes.items() if (n.updated or 0) > (seen_before[h] or 0))
    await fleet.stop()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    node_side = sum(nodes_after.get(p, 0) - t for p, t in nodes_before.items())
    return 100 * cpu / wall, 100 * node_side / wall, fresh


def node_cpu(sshd: Sshd) -> dict[int, float]:
    """CPU seconds so far of every process under the test sshd (its sessions and the probes)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in descendants(sshd.pid) if sshd.pid else ():
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            out[pid] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, ValueError, IndexError):
            continue
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--cpu-seconds", type=float, default=20.0)
    parser.add_argument("--smoke", action="store_true", help="2 nodes, 2 rounds (the test suite's smoke test)")
    args = parser.parse_args()
    if args.smoke:
        args.nodes, args.rounds, args.cpu_seconds = [2], 2, 1.0
    largest = max(args.nodes)
    world = make_world()
    sshd = Sshd(world, "bench", free_port(), None, max_startups=4 * largest, max_sessions=16).start()
    try:
        for a in addresses(largest):
            world.trust(a, sshd.port, sshd.host_key_line)
        world.write_config([("127.0.1.*", {"Port": sshd.port})])
        control = world.root / "cm"
        control.mkdir()
        options = SSHOptions(config=(str(world.ssh_config),), connect_timeout=10)
        print(f"sshd {sshd.port}, {os.cpu_count()} cores; medians (p90) of {args.rounds} rounds, seconds", flush=True)
        print(f"{'nodes':>5}  {'ssh':>14}  {'ssh-cm':>14}  {'cockpit-run':>14}  {'cockpit':>14}  cockpit/ssh-cm")
        for n in args.nodes:
            hosts = addresses(n)
            ssh_round(hosts, world.ssh_config, control)  # start the masters
            results = {"ssh": [ssh_round(hosts, world.ssh_config, None) for _ in range(args.rounds)],
                       "ssh-cm": [ssh_round(hosts, world.ssh_config, control) for _ in range(args.rounds)]}
            results.update(asyncio.run(cockpit_rounds(hosts, options, world.probe_python, args.rounds)))
            cells = [stats(results[k]) for k in ("ssh", "ssh-cm", "cockpit-run", "cockpit")]
            ratio = cells[3][0] / cells[1][0]
            print(f"{n:>5}  " + "  ".join(f"{m:>6.3f} ({p:.3f})" for m, p in cells) + f"  {ratio:.2f}x", flush=True)
        subprocess.run(["ssh", "-F", str(world.ssh_config), "-o", f"ControlPath={control}/%h", "-O", "exit",
                        "127.0.1.1"], capture_output=True)
        own, nodes, fresh = asyncio.run(watch_cpu(addresses(largest), options, world.probe_python,
                                                  args.cpu_seconds, sshd))
        print(f"watching {largest} nodes at 1 Hz for {args.cpu_seconds:g} s: cockpit {own:.1f}% of one core "
              f"(target <= 5%); the {largest} probes + sshd sessions {nodes:.1f}%; {fresh}/{largest} nodes fresh")
    finally:
        sshd.stop()
        shutil.rmtree(world.root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
