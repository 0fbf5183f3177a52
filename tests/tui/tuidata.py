"""Data for the TUI tests: fleet data from the recorded NVML fixtures (tests/fixtures/nvml/), a context with
fixed values (clock, facts, runs directory, config), and made-up but realistic run directories.

Snapshots must not depend on this machine: no clock, no hostname, no absolute tmp paths, no pids."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

from helpers import REPO

from cockpit import nvml, nvml_replay
from cockpit.fleet.records import NodeReport
from cockpit.run.store import RankExit, RunStatus, create_run_dir, write_status

NVML = REPO / "tests" / "fixtures" / "nvml"
NOW = 1_800_000_000.0  # the fixed clock of every snapshot


def node_from_recording(host: str, name: str, util_shift: int = 0, memory_scale: float = 1.0,
                        updated: float | None = None) -> NodeReport:
    """A fleet node from a recorded NVML fixture (through the `cockpit gpus --json` shape, as a node sends it),
    its GPUs' utilization lowered by ``util_shift`` points and memory use scaled, reported at ``updated``."""
    rec = json.loads((NVML / f"{name}.json").read_text())
    report = nvml.read(nvml_replay.RecordedSource(rec), env=rec.get("env", {})).to_dict()
    for gpu in report["gpus"]:
        if gpu["utilization_gpu"] is not None:
            gpu["utilization_gpu"] = max(0, min(100, gpu["utilization_gpu"] - util_shift))
        if gpu["memory_used_mib"] is not None:
            gpu["memory_used_mib"] = round(gpu["memory_used_mib"] * memory_scale)
    state = report.pop("state")
    reason = report.pop("reason")
    return NodeReport.from_dict({
        "host": host, "state": state, "reason": reason, "hint": None, "updated": updated, "hostname": host,
        "interfaces": [{"name": "eth0", "up": True, "loopback": False, "ipv4": ["10.0.0.7/24"]}],
        "versions": None, "ports": None, "cpus": 64 if report["gpus"] else 2, **report})


def fleet_snapshot(util_shift: int = 0, memory_scale: float = 1.0, updated: float | None = None
                   ) -> list[NodeReport]:
    gpus = {"util_shift": util_shift, "memory_scale": memory_scale, "updated": updated}
    nodes = [node_from_recording("localhost", "no-driver", updated=updated),
             node_from_recording("gpu-h100", "h100-80gb-hbm3-load", **gpus),
             node_from_recording("gpu-a5000", "dual-rtx-a5000", **gpus),
             node_from_recording("gpu-a100", "a100-sxm4-80gb-mig", **gpus)]
    nodes.append(NodeReport("gpu-down", "unreachable", "connection refused (port 22)",
                            "is sshd running on the node? is the host name right?"))
    return nodes


READINGS = 40  # fleet_history's length: wider than the 160-column sparklines, fewer than History keeps
STEP = 2.0  # seconds between readings (the TUI's default refresh)


def fleet_history() -> list[list[NodeReport]]:
    """READINGS snapshots STEP seconds apart ending at NOW, so the sparklines and the chart have a history that
    is the same on every machine: memory fills up over the first ten readings (a model loading), utilization
    swings (data loading stalls) and ends 10 points under the recorded values, as before."""
    shifts = [round(40 + 35 * math.sin(k / 2.5)) for k in range(READINGS - 1)] + [10]
    return [fleet_snapshot(shift, min(1.0, 0.3 + 0.07 * k), NOW - STEP * (READINGS - 1 - k))
            for k, shift in enumerate(shifts)]


def fleet_shown(app) -> bool:
    """The app has recorded every reading of fleet_history, handled the last one (the fleet's updates are
    handled after they are recorded, and coalesce) and, on the Fleet screen, drawn it: the screen redraws when
    its fleet signal's callback runs, posted to the screen after the app took the update (Textual's
    Signal.subscribe without immediate=True), so the app can hold the last reading while the table still shows
    an earlier one."""
    from cockpit.tui.models import fleet, gpu_history
    from cockpit.tui.screens.fleet import FleetScreen
    from cockpit.tui.widgets.gpu_table import GpuTable

    if not (len(app.history.util("gpu-h100", 0)) == READINGS and app.nodes and app.nodes[1].updated == NOW):
        return False
    if not isinstance(app.screen, FleetScreen):
        return True
    table = app.screen.query_one(GpuTable)
    want = fleet.rows(app.nodes, app.history, app.selection, gpu_history.spark_width(app.size.width))
    shown = [tuple(str(c) for c in table.get_row_at(i)) for i in range(table.row_count)]
    return shown == [r.cells for r in want]


def fixed_facts(facts):
    return dataclasses.replace(facts, python="/usr/bin/python3", node_names=tuple(
        "node0" if n not in ("gpu-node1", "gpu-node2") else n for n in facts.node_names),
        workdir="/work/jobs", run_dir="/runs/dry-run")



def make_run(runs_dir: Path, name: str, state: str, created: float, ranks: int = 2, host: str = "node0",
             logs: dict[str, str] | None = None, launcher: str = "local") -> Path:
    """A run directory as the local launcher and supervisor leave it (no processes behind it). ``logs`` maps a
    file name under logs/ to its text."""
    run_id = f"{name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime(created))}-ab{ranks:02d}"
    create_run_dir(runs_dir, run_id)
    run_dir = runs_dir / run_id  # as the caller named the runs directory (create_run_dir gives its real path)
    final = state in ("succeeded", "failed", "stopped")
    status = RunStatus(run_id=run_id, name=name, launcher=launcher, job_file="/work/jobs/demo.yaml",
                       hosts=[host], world_size=ranks, state=state, created=created, started=created + 1,
                       ended=created + 30 if final else None, exit_code=(1 if state == "failed" else 0)
                       if final else None)
    for file_name, text in (logs or {}).items():
        (run_dir / "logs" / file_name).write_text(text)
    if final:
        for rank in range(ranks):
            code = 1 if state == "failed" and rank == 1 else 143 if state == "failed" else 0
            (run_dir / "logs" / f"rank-{rank}.{host}.exit").write_text(f"{code} {created + 29}\n")
            status.ranks[str(rank)] = RankExit(rank, host, code, created + 29)
    metrics = run_dir / "metrics"
    metrics.mkdir()
    for rank in range(ranks):
        with open(metrics / f"rank-{rank}.jsonl", "w") as f:
            for step in range(1, 41):
                f.write(json.dumps({"step": step, "epoch": 0, "loss": 1.0 / step + 0.01 * (step % 3),
                                    "samples_per_s": 2000 + 50 * (step % 7), "time": created + step,
                                    "rank": rank}) + "\n")
    write_status(run_dir, status)
    return run_dir


FAILED_LOGS = {p.name: p.read_text() for p in sorted((Path(__file__).parent / "fixtures" / "failed-demo").iterdir())}
OK_LOGS = {f"rank-{r}.node0.log": f"[cockpit] start rank={r} world=2 backend=ddp pg_backend=gloo device=cpu\n"
           "[cockpit] step=10 epoch=0 loss=0.421104 samples/s=1791.8\n[demo] finished 20 steps in 1.3s\n"
           for r in (0, 1)}


async def until(pilot, predicate, timeout: float = 10.0, what: str = "the condition") -> None:
    """Let the app run until ``predicate()`` holds (workers finish, messages are handled)."""
    import asyncio

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await pilot.pause(0.05)
    await asyncio.sleep(0)

