"""Each GPU's history (cockpit.tui.models.gpu_history) without a screen: sparklines, the width rule that makes them
follow the terminal, the bound on what is kept, and the chart of one GPU over time."""

from __future__ import annotations

import dataclasses
import tracemalloc

from tui.tuidata import NOW, fleet_history, fleet_snapshot

from cockpit.tui.models import fleet as fleetview
from cockpit.tui.models.gpu_history import (
    KEEP,
    MAX_SPARK,
    MIN_SPARK,
    History,
    gpu_chart,
    spark_width,
    sparkline,
    time_ticks,
)

GPUS = 4  # in fleet_snapshot: h100, two a5000s, a100


def test_sparkline_and_history():
    assert sparkline([0, 50, 100, None], width=4) == "▁▅█·"
    assert sparkline([10], width=3) == "  ▁"
    h = History(keep=2)
    for shift in (0, 10, 20):
        h.record(fleet_snapshot(shift))
    assert h.util("gpu-h100", 0) == [90, 80]
    assert h.count("gpu-h100", 0) == 3 and h.size() == 2 * GPUS


def test_a_report_published_again_is_not_a_new_reading():
    """The feed publishes every node whenever one changes: a node's unchanged report (same ``updated``) must
    not add a reading, or a silent node would draw a flat line of copies."""
    h = History()
    first, second = fleet_snapshot(10, updated=NOW - 2), fleet_snapshot(0, updated=NOW)
    for nodes in (first, first, second, second):
        h.record(nodes, now=NOW + 99)
    assert h.util("gpu-h100", 0) == [90, 100] and h.times("gpu-h100", 0) == [NOW - 2, NOW]
    h.record(fleet_snapshot(0), now=NOW + 5)  # a node that says nothing of when: the caller's clock
    assert h.times("gpu-h100", 0)[-1] == NOW + 5


def test_history_stays_bounded_after_10000_readings():
    nodes = fleet_snapshot()
    h = History()

    def feed(start: int, count: int) -> None:
        for k in range(start, start + count):
            h.record([dataclasses.replace(n, updated=float(k)) for n in nodes])

    tracemalloc.start()
    try:
        feed(0, KEEP)
        full = tracemalloc.get_traced_memory()[0]
        feed(KEEP, 10_000 - KEEP)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert h.size() == KEEP * GPUS and h.count("gpu-h100", 0) == 10_000
    assert h.times("gpu-h100", 0) == [float(k) for k in range(10_000 - KEEP, 10_000)]
    assert after - full < 4096, f"grew by {after - full} bytes after the history was full"


def test_sparkline_width_follows_the_terminal_and_the_table_fits():
    assert spark_width(80) == MIN_SPARK and spark_width(60) == MIN_SPARK  # never narrower than at 80
    assert spark_width(160) == 46 and spark_width(1000) == MAX_SPARK <= KEEP
    widths = [spark_width(c) for c in range(60, 400)]
    assert widths == sorted(widths)
    for columns in (80, 120, 160, 200):
        # DataTable pads each cell by one column each side; 3 more for the scrollbar and the border
        assert sum(fleetview.widths(spark_width(columns))) + 2 * len(fleetview.COLUMNS) + 3 <= columns


def test_row_cells_keep_their_width_whatever_the_values():
    h = History()
    for nodes in fleet_history():
        h.record(nodes)
    for spark in (MIN_SPARK, 46):
        lengths = {tuple(len(c) for c in r.cells[3:5])
                   for nodes in fleet_history() for r in fleetview.rows(nodes, h, fleetview.Selection(), spark)
                   if r.gpu is not None}
        assert lengths == {(5 + spark, 8 + spark)}


def test_gpu_chart_over_seconds_before_the_latest_reading():
    h = History()
    snapshots = fleet_history()
    h.record(snapshots[0])
    gpu = snapshots[0][1].gpus[0]
    one = gpu_chart("gpu-h100", gpu, h)
    assert one.lines == () and "no history yet" in one.title
    for nodes in snapshots[1:]:
        h.record(nodes)
    gpu = snapshots[-1][1].gpus[0]
    chart = gpu_chart("gpu-h100", gpu, h)
    assert chart.title == "gpu-h100 GPU 0 · H100 80GB HBM3 · util 90% · memory 24%"
    util, mem = chart.lines
    assert (util.label, mem.label) == ("util %", "memory %")
    assert util.xs[0] == -2.0 * (len(snapshots) - 1) and util.xs[-1] == 0.0 and util.ys[-1] == 90
    assert mem.ys[0] < mem.ys[-1] and round(mem.ys[-1]) == 24 and all(0 <= y <= 100 for y in util.ys + mem.ys)
    assert time_ticks(chart) == [-60.0, -40.0, -20.0, 0.0]  # 78 s: round steps, at most 5 ticks
    short = dataclasses.replace(chart, lines=(dataclasses.replace(util, xs=(-10.0, -4.0, 0.0)),))
    assert time_ticks(short) == [-10.0, -5.0, 0.0]
    assert time_ticks(dataclasses.replace(chart, lines=())) == [0.0]


def test_gpu_chart_skips_unknown_readings():
    h = History()
    for nodes in fleet_history()[:3]:
        h.record(nodes)
    a100 = fleet_history()[0][3].gpus[0]  # MIG: no utilization reported
    chart = gpu_chart("gpu-a100", a100, h)
    assert [line.label for line in chart.lines] == ["memory %"] and "util -" in chart.title
