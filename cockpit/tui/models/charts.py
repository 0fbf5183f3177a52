"""The charts screen's decisions, pure (no textual, no IO): which chart comes next, which rank is picked, the
words of its title line, and the GPU chart: each rank's GPU (host, index) from the run's status and job, and
its utilisation and memory over time from the fleet's history (cockpit.tui.models.gpu_history.History readings).

A rank's GPU is the one its local rank uses (torchrun's, Slurm's LOCALID): the position of the rank among the
ranks of its host, through the job's ``gpus: [ids]`` when it names them (CUDA_VISIBLE_DEVICES order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cockpit.plot.chart import LineChart, lines_for

METRICS = ("loss", "rate", "heat", "wait", "gpu")
NAMES = {"loss": "loss", "rate": "rate", "heat": "heat map", "wait": "wait map", "gpu": "GPU"}
GpuMap = dict[int, tuple[str, int]]
NO_GPU = "no GPU data for this run"


def next_metric(metric: str) -> str:
    return METRICS[(METRICS.index(metric) + 1) % len(METRICS)]


def next_pick(pick: int | None, ids: Sequence[int]) -> int | None:
    """All (None) -> the first -> ... -> the last -> all again; a pick no longer there starts over."""
    ids = sorted(ids)
    if not ids:
        return None
    if pick is None:
        return ids[0]
    later = [i for i in ids if i > pick]
    return later[0] if later else None


def title_line(run: str, metric: str, pick: int | None, sweep: bool, log_y: bool = False,
               node: str | None = None) -> str:
    who = "trial" if sweep else "rank"
    picked = f"all {who}s" if pick is None else f"{who} {pick}"
    picked = f"node {node}'s ranks" if node is not None else picked
    log = " · log y" if log_y and metric in ("loss", "rate") else ""
    return f"{run} · {NAMES[metric]} · {picked}{log}"  # the keys are the footer's


def next_node(node: str | None, nodes: Sequence[str]) -> str | None:
    """All (None) -> the first of ``nodes`` -> ... -> the last -> all again; a node no longer there starts over."""
    if not nodes:
        return None
    if node is None or node not in nodes:
        return nodes[0]
    at = nodes.index(node) + 1
    return nodes[at] if at < len(nodes) else None


def node_order(hosts: dict[int, str], status) -> list[str]:
    """The run's nodes, those holding a rank the watchdog flags (stall, straggler, ...) first, then by lowest
    rank: the drill-down's order, the outliers one key away."""
    progress = (status.progress if status is not None else None) or {}
    flagged = {hosts.get(int(r)) for r, rec in progress.items() if r.isdigit() and rec.flag}
    ordered = list(dict.fromkeys(hosts[r] for r in sorted(hosts)))
    return sorted(ordered, key=lambda h: h not in flagged)


def rank_gpus(rank_hosts: dict[int, str], gpu_ids: Sequence[int] | None) -> GpuMap:
    """rank -> (host, GPU index): the rank's position among its host's ranks, mapped through ``gpu_ids``
    (the job's ``gpus: [..]``; None: the GPUs in order)."""
    by_host: dict[str, list[int]] = {}
    for rank in sorted(rank_hosts):
        by_host.setdefault(rank_hosts[rank], []).append(rank)
    out: GpuMap = {}
    for host, ranks in by_host.items():
        for local, rank in enumerate(ranks):
            out[rank] = (host, gpu_ids[local] if gpu_ids and local < len(gpu_ids) else local)
    return out


def fleet_hosts(gpus: GpuMap, has_data: Callable[[str, int], bool], local: Sequence[str]) -> GpuMap:
    """The same map with each host as Fleet names it: a local run's ranks name this machine by its hostname,
    Fleet by its own name for it (``local``, e.g. localhost: pass it for a local run only, whose every rank
    is on this machine); a GPU with readings under its own name keeps it."""
    out: GpuMap = {}
    for rank, (host, index) in gpus.items():
        alias = next((name for name in local if has_data(name, index)), None)
        out[rank] = (host, index) if has_data(host, index) or alias is None else (alias, index)
    return out


Readings = tuple[list[float], list[float | None]]  # the times of a GPU's readings, and its values


def gpu_chart(readings: dict[int, Readings], gpus: GpuMap, title: str, what: str, width: int = 80) -> LineChart:
    """One rank's GPU reading (``what``: 'utilisation' or 'memory', percent) per line over seconds since the
    first reading; the mean with a min-max band beyond cockpit.plot.chart.MAX_LINES ranks."""
    full = f"{title}: GPU {what} per rank (%)"
    pts = {r: [(t, v) for t, v in zip(*readings[r], strict=True) if v is not None] for r in sorted(readings)}
    pts = {r: p for r, p in pts.items() if p}
    if not pts:
        where = ", ".join(f"{h}:gpu{i}" for h, i in sorted(set(gpus.values()))[:4])
        why = f"{NO_GPU}: Fleet has no readings of {where}" if where else NO_GPU
        return LineChart(full, "seconds", "%", (), note=why, x_is_time=True)
    t0 = min(p[0][0] for p in pts.values())
    named = [(r, tuple((t - t0, v) for t, v in p)) for r, p in pts.items()]
    lines = lines_for([(f"rank {r} {gpus[r][0]}:gpu{gpus[r][1]}", p) for r, p in named], width)
    return LineChart(full, "seconds", "%", lines, x_is_time=True)
