"""Loss and samples/s of one rank as sparklines, with the latest values (from cockpit.tui.metrics.Series)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Sparkline, Static

from cockpit.tui.metrics import Series


class MetricsPlot(Vertical):
    def compose(self) -> ComposeResult:
        yield Static("metrics: none yet", id="loss-label", classes="plot-label", markup=False)
        yield Sparkline([], id="loss-plot")
        yield Static("", id="sps-label", classes="plot-label", markup=False)
        yield Sparkline([], id="sps-plot")

    def show(self, series: Series | None) -> None:
        """Labels are one line each: updated without a layout pass (this runs every second)."""
        loss, sps = self.query_one("#loss-plot", Sparkline), self.query_one("#sps-plot", Sparkline)
        if series is None or not series.steps:
            self.query_one("#loss-label", Static).update("metrics: none yet", layout=False)
            self.query_one("#sps-label", Static).update("", layout=False)
            loss.data, sps.data = [], []
            return
        self.query_one("#loss-label", Static).update(
            f"rank {series.rank} loss {series.loss[-1]:.4g} @ {series.steps[-1]}", layout=False)
        self.query_one("#sps-label", Static).update(f"samples/s {series.samples_per_s[-1]:,.0f}", layout=False)
        loss.data, sps.data = list(series.loss), list(series.samples_per_s)
