"""One GPU's utilization and memory over time (cockpit.tui.models.gpu_history.gpu_chart), drawn by plotext through
textual-plotext with the same calls as `cockpit plot` (cockpit.plot.text.apply), on a 0-100 % axis.

``show`` draws only when what it is given differs from what is drawn (another GPU, or new readings), so the
fleet's refreshes, which also come for selection changes, redraw the chart at most once per new reading."""

from __future__ import annotations

from collections.abc import Callable

from textual_plotext import PlotextPlot

from cockpit.plot.chart import LineChart
from cockpit.plot.text import apply
from cockpit.tui.models.gpu_history import KEEP, time_ticks

PERCENT_TICKS: list[float] = [0, 25, 50, 75, 100]


class GpuChart(PlotextPlot):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.drawn: object = None  # what the chart shows now (the caller's token)
        self.draws = 0  # how many times it was drawn: tests check that refreshes coalesce

    def show(self, token: object, build: Callable[[], LineChart]) -> None:
        """Draw the chart ``build`` makes unless ``token`` (which GPU, how many readings) is drawn already."""
        if token == self.drawn:
            return
        self.drawn, self.draws = token, self.draws + 1
        chart, plt = build(), self.plt
        apply(chart, plt, KEEP)  # every reading: a GPU has at most KEEP, and the size may not be known yet
        plt.ylim(0, 100)
        plt.yticks(PERCENT_TICKS)
        ticks = time_ticks(chart)
        plt.xticks(ticks, [f"{t:.0f}" for t in ticks])
        self.refresh()
