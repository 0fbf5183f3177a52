"""A line chart (cockpit.plot.chart.LineChart) drawn by plotext through textual-plotext, which can take its
picture already drawn.

Why: textual-plotext draws in ``render``, on the UI thread: for a 64-rank band on a 120-column terminal that is
10-50 ms of plotext and ANSI parsing per chart shown, a key press's whole budget. ``prerender`` makes the same
picture (the same plotext calls, the same size and theme) anywhere, e.g. in the worker that built the chart;
``show`` with it makes ``render`` hand it back while the widget's size and theme are the ones it was drawn for,
and draw as before when they are not (a resize, another layout). ``ready`` (cockpit.tui.widgets.ready_strips):
the same picture already turned into strips, so that showing it takes no conversion on the UI thread either.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import RenderResult
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

from cockpit.plot.chart import LineChart
from cockpit.plot.text import apply
from cockpit.tui.widgets.ready_strips import Ready, ReadyStrips

Drawn = tuple[tuple[int, int, str], Text]  # (width, height, plotext theme) -> the picture


def prerender(chart: LineChart, width: int, height: int, theme: str) -> Drawn:
    """``chart`` drawn as ChartPlot.render would draw it in a widget of ``width`` x ``height`` under ``theme``
    (ChartPlot.theme_name's); no textual state is read, so any thread may call it."""
    plot = Plot()
    apply(chart, plot, max(10, width), height=height)
    plot.plotsize(width, height)
    plot._set_size(width, height)  # as PlotextPlot.render does (textual-plotext issue 5)
    plot.theme(theme)
    return (width, height, theme), Text.from_ansi(plot.build())


class ChartPlot(ReadyStrips, PlotextPlot):
    """A PlotextPlot that shows one LineChart at a time."""

    _drawn: Drawn | None = None
    _chart: LineChart | None = None  # the chart shown, put onto the plotext figure when the widget draws it

    def theme_name(self) -> str:
        """The plotext theme the widget draws with now (textual-plotext's name for the app's theme)."""
        return self._get_plotext_theme_name(self.app.theme)

    def show(self, chart: LineChart, drawn: Drawn | None = None, ready: Ready | None = None) -> None:
        """Draw ``chart``; ``drawn``: its picture from ``prerender``, used while it fits; ``ready``: that
        picture's strips (for the widget's paint when they were prepared). The plotext figure gets the chart
        only when the widget draws it itself (a key with a picture that fits calls no plotext)."""
        self._chart = chart
        self._drawn = drawn
        self._ready = ready if drawn is not None else None
        self.refresh()

    def _fits(self) -> Ready | None:
        drawn = self._drawn
        if drawn is None or drawn[0] != (self.size.width, self.size.height, self.theme_name()):
            return None
        return super()._fits()

    def render(self) -> RenderResult:
        drawn = self._drawn
        if drawn is not None and drawn[0] == (self.size.width, self.size.height, self.theme_name()):
            return drawn[1]
        self._drawn = self._ready = None  # drawn for another size or theme: plotext draws it here, as it always did
        if self._chart is not None:
            apply(self._chart, self.plt, max(10, self.size.width or self.screen.size.width),
                  height=self.size.height or None)
            self._chart = None
        return super().render()
