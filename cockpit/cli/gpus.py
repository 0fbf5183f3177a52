"""`cockpit gpus`: the GPUs of this machine or of many nodes, in nvidia-smi order, with their processes. stdout
carries the table or JSON; nodes in error are part of the data; it exits 1 when no node reported GPUs (every
node failed, or none has a driver), with what to do on stderr."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

from cockpit.cli.common import EXIT_FAILED, EXIT_OK
from cockpit.cli.targets import fleet_for, refresh

if TYPE_CHECKING:
    from cockpit.fleet.records import NodeReport
    from cockpit.gpu import Gpu


def cmd_gpus(args: argparse.Namespace) -> int:
    import asyncio

    fl = fleet_for(args)
    if args.watch is not None:
        return asyncio.run(_watch(fl, args.watch, args.json))
    nodes = asyncio.run(refresh(fl))
    print(json.dumps({"nodes": [n.to_dict() for n in nodes]}, indent=2) if args.json else render_table(nodes),
          flush=True)
    if any(n.state == "ok" for n in nodes):
        return EXIT_OK
    print(f"cockpit: {no_gpus_reason(nodes)}", file=sys.stderr)
    return EXIT_FAILED


def no_gpus_reason(nodes: list[NodeReport]) -> str:
    """Why no node reported GPUs, and what to do, in one line."""
    states = [n.state for n in nodes]
    if all(s == "no_driver" for s in states):
        where = "this machine" if [n.host for n in nodes] == ["localhost"] else f"any of the {len(nodes)} nodes"
        return (f"no NVIDIA driver on {where}, so no GPUs to show (hint: install the NVIDIA driver, or run on CPU: "
                "gpus: none in the job file)")
    counts = ", ".join(f"{states.count(s)} {s.replace('_', ' ')}" for s in dict.fromkeys(states))
    return (f"no node reported its GPUs ({counts}) (hint: each node's line says why; check that ssh HOST works, "
            "or give --timeout, --python, --user)")


async def _watch(fl, interval: float, as_json: bool) -> int:
    import asyncio

    fl.start(interval)
    clear = sys.stdout.isatty() and not as_json
    try:
        await fl.refresh_now(min(fl.timeout, 5.0))
        while True:
            nodes = [n.node_report() for n in fl.statuses()]
            if as_json:
                print(json.dumps({"time": time.time(), "nodes": [n.to_dict() for n in nodes]}), flush=True)
            else:
                print(("\033[H\033[2J" if clear else "") + render_table(nodes) + ("" if clear else "\n"), flush=True)
            await asyncio.sleep(interval)
    finally:
        await fl.stop()


def render_table(nodes: list[NodeReport]) -> str:
    """Per node: a header line (state, driver), then its GPUs in nvidia-smi order and their processes."""
    out = []
    for n in nodes:
        out.append(_node_line(n))
        if n.gpus:
            out.append(f"  {'GPU':>3}  {'NAME':<24} {'UTIL':>4}  {'MEMORY':>19}  {'TEMP':>4}  {'POWER':>11}  PROCS")
        for g in n.gpus:
            out.append(f"  {g.index:>3}  {_s(g.name)[:24]:<24} {_pct(g.utilization_gpu):>4}  "
                       f"{_memory(g):>19}  {_temp(g.temperature_c):>4}  {_power(g):>11}  {len(g.processes)}")
            for p in g.processes:
                mem = f"{p.used_memory_mib} MiB" if p.used_memory_mib is not None else "? MiB"
                out.append(f"       pid {p.pid:<8} {_s(p.user)[:12]:<12} {mem:>10}  {_s(p.command)[:60]}")
        for w in n.warnings or ():
            out.append(f"  warning: {w}")
    return "\n".join(out)


def _node_line(n: NodeReport) -> str:
    if n.state == "ok":
        facts = [f"driver {n.driver_version}" if n.driver_version else None,
                 f"CUDA {n.cuda_version}" if n.cuda_version else None,
                 f"{len(n.gpus)} GPU" + ("s" if len(n.gpus) != 1 else "")]
        name = f" ({n.hostname})" if n.hostname and n.hostname != n.host else ""
        return f"{n.host}{name}: ok, " + ", ".join(f for f in facts if f)
    hint = f" (hint: {n.hint})" if n.hint else ""
    return f"{n.host}: {n.state.replace('_', ' ')}: {n.reason or 'no reason given'}{hint}"


def _s(value) -> str:
    return "?" if value is None else str(value)


def _pct(value) -> str:
    return "-" if value is None else f"{value}%"


def _temp(value) -> str:
    return "-" if value is None else f"{value}C"


def _memory(g: Gpu) -> str:
    used, total = g.memory_used_mib, g.memory_total_mib
    return "-" if used is None and total is None else f"{_s(used)} / {_s(total)} MiB"


def _power(g: Gpu) -> str:
    draw, limit = g.power_draw_w, g.power_limit_w
    if draw is None and limit is None:
        return "-"
    return f"{'?' if draw is None else round(draw)} / {'?' if limit is None else round(limit)} W"
