"""Each GPU's recent utilization and memory use, the way nvitop shows it: a sparkline in the fleet table whose
width follows the terminal, and a chart over time for the highlighted GPU. Pure: no textual, no IO, no clock
(the caller passes the time of each reading), so the same readings always draw the same sparklines and chart.

Bounded: ``KEEP`` readings per GPU, whatever the uptime: three deques of at most KEEP numbers each, about
10 KB per GPU with the objects they hold (tracemalloc, 120 readings), so 64 nodes x 8 GPUs take about 5 MB."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from cockpit.fleet.records import NodeReport
from cockpit.nvml import Gpu
from cockpit.plot.chart import Line, LineChart

SPARK = "▁▂▃▄▅▆▇█"
KEEP = 120  # readings per GPU: 4 minutes at the default 2 s refresh, and more than the widest sparkline
MIN_SPARK, MAX_SPARK = 6, 60  # sparkline cells: 6 at 80 columns, growing with the terminal up to 60
BASE_COLUMNS = 80  # the width at which the table's fixed columns plus two MIN_SPARK sparklines fit exactly


def spark_width(columns: int) -> int:
    """Cells per sparkline for a terminal ``columns`` wide: MIN_SPARK at 80 columns, and half of every
    column beyond that for each of the two sparklines (util, memory), up to MAX_SPARK. It depends only on
    the terminal's width, never on the values, so the table's columns stay put as readings arrive."""
    return max(MIN_SPARK, min(MAX_SPARK, MIN_SPARK + (columns - BASE_COLUMNS) // 2))


def sparkline(values: Sequence[float | None], width: int = MIN_SPARK, maximum: float = 100.0) -> str:
    """The last ``width`` values as block characters (0..maximum); unknown values are '·', padded left."""
    out = []
    for v in list(values)[-width:]:
        if v is None:
            out.append("·")
        else:
            level = max(0.0, min(1.0, v / maximum)) if maximum > 0 else 0.0
            out.append(SPARK[min(len(SPARK) - 1, int(level * len(SPARK)))])
    return "".join(out).rjust(width)


def memory_percent(gpu: Gpu) -> float | None:
    used, total = gpu.memory_used_mib, gpu.memory_total_mib
    return None if used is None or not total else 100.0 * used / total


class History:
    """The last ``keep`` readings of each GPU's utilization and memory use (percent), fed one fleet snapshot
    at a time. A reading's time is its node's ``updated`` (when the node's report arrived) or, for a node
    that does not say, ``now`` from the caller. The feed publishes the whole fleet whenever any node
    changes, so a node whose report is the one already recorded (same ``updated``) adds nothing: a node
    that stopped reporting shows a gap in time, not a flat line of copies."""

    def __init__(self, keep: int = KEEP):
        self.keep = keep
        self._util: dict[tuple[str, int], deque] = {}
        self._mem: dict[tuple[str, int], deque] = {}
        self._time: dict[tuple[str, int], deque] = {}
        self._count: dict[tuple[str, int], int] = {}

    def record(self, nodes: list[NodeReport], now: float = 0.0) -> None:
        for node in nodes:
            when = now if node.updated is None else node.updated
            for gpu in node.gpus:
                key = (node.host, gpu.index)
                times = self._time.setdefault(key, deque(maxlen=self.keep))
                if node.updated is not None and times and times[-1] == node.updated:
                    continue  # the same report published again
                times.append(when)
                self._util.setdefault(key, deque(maxlen=self.keep)).append(gpu.utilization_gpu)
                self._mem.setdefault(key, deque(maxlen=self.keep)).append(memory_percent(gpu))
                self._count[key] = self._count.get(key, 0) + 1

    def util(self, host: str, index: int) -> list[float | None]:
        return list(self._util.get((host, index), ()))

    def memory(self, host: str, index: int) -> list[float | None]:
        return list(self._mem.get((host, index), ()))

    def times(self, host: str, index: int) -> list[float]:
        """When each reading of util() and memory() was taken."""
        return list(self._time.get((host, index), ()))

    def count(self, host: str, index: int) -> int:
        """Readings recorded for this GPU ever (not bounded): a chart drawn at count n is still current
        while the count is n."""
        return self._count.get((host, index), 0)

    def size(self) -> int:
        """Readings held, all GPUs together (the bound: at most keep x GPUs)."""
        return sum(len(d) for d in self._time.values())


def gpu_chart(host: str, gpu: Gpu, history: History) -> LineChart:
    """Utilization and memory use (percent) of one GPU over its history; x is seconds before the latest
    reading (0 = now, as far as the fleet knows). The title carries the name and the current values; with
    fewer than two readings the chart has no lines and says so."""
    i = gpu.index
    mem = memory_percent(gpu)
    title = (f"{host} GPU {i} · {(gpu.name or '?').removeprefix('NVIDIA ')} · util "
             f"{'-' if gpu.utilization_gpu is None else f'{gpu.utilization_gpu}%'} · memory "
             f"{'-' if mem is None else f'{mem:.0f}%'}")
    times = history.times(host, i)
    if len(times) < 2:
        return LineChart(f"{title} · no history yet", "seconds ago", "", (), note="no history yet",
                         x_is_time=True)
    last = times[-1]
    lines = []
    for label, values in (("util %", history.util(host, i)), ("memory %", history.memory(host, i))):
        pts = [(t - last, float(v)) for t, v in zip(times, values, strict=True) if v is not None]
        if pts:
            lines.append(Line(label, tuple(p[0] for p in pts), tuple(p[1] for p in pts)))
    return LineChart(title, "seconds ago", "", tuple(lines), x_is_time=True)  # the legend says %


TICK_STEPS = (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 1800, 3600)


def time_ticks(chart: LineChart, count: int = 5) -> list[float]:
    """At most ``count`` x ticks at a round number of seconds back from 0 (plotext's own fall on '-7.5')."""
    span = -min((x for line in chart.lines for x in line.xs), default=0.0)
    step = next((s for s in TICK_STEPS if span / s <= count - 1), TICK_STEPS[-1])
    return [-float(step * k) for k in range(int(span // step), 0, -1)] + [0.0]
