"""The run view's at-a-glance metrics: one rank's loss and rate as sparklines with the latest values, from
cockpit.plot's RankSeries (the reader the charts screen uses too). The full charts, with axes, scale and every
rank, are the charts screen's (`c`)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Sparkline, Static

from cockpit.plot.series import UNITS, RankSeries

SIDE_POINTS = 100  # points kept per rank for the side panel (cockpit.plot.series.Track keeps up to twice that)
SPARK_CELLS = 36  # the panel's width: rate intervals to compute (each the mean over its span)


class MetricsPlot(Vertical):
    """Shows the last series given; one that arrives before the widget's children are mounted (the run view's
    first metrics read can beat them on a loaded machine) is kept and shown once they are."""

    _pending: RankSeries | None = None
    _empty: str | None = None
    _rate: str | None = None
    _ready = False

    def on_mount(self) -> None:
        self._ready = True
        if self._pending is not None or self._empty is not None:
            self.show(self._pending, self._empty, self._rate)

    def compose(self) -> ComposeResult:
        yield Static("metrics: none yet", id="loss-label", classes="plot-label", markup=False)
        yield Sparkline([], id="loss-plot")
        yield Static("", id="sps-label", classes="plot-label", markup=False)
        yield Sparkline([], id="sps-plot")

    def show(self, series: RankSeries | None, empty: str | None = None, rate: str | None = None) -> None:
        """Labels are one line each: updated without a layout pass (this runs every second). ``empty``: what
        to say without a series (default: none yet); ``rate``: the rate line (cockpit.tui.models.rank_table.
        side_rate; default: the series' latest interval)."""
        if not self._ready:
            self._pending, self._empty, self._rate = series, empty, rate
            return
        self._pending = None
        loss_plot, rate_plot = self.query_one("#loss-plot", Sparkline), self.query_one("#sps-plot", Sparkline)
        loss_label, rate_label = self.query_one("#loss-label", Static), self.query_one("#sps-label", Static)
        if series is None or not series.counts:
            loss_label.update(empty or "metrics: none yet", layout=False)
            rate_label.update("", layout=False)
            loss_plot.data, rate_plot.data = [], []
            return
        losses = series.losses()
        rates = series.rate(SPARK_CELLS)
        unit = UNITS[series.source]
        if losses:
            step, loss = losses[-1]
            loss_label.update(f"rank {series.rank} loss {loss:.4g} @ {step}", layout=False)
        else:
            loss_label.update(f"rank {series.rank}: no loss recorded", layout=False)
        rate_label.update(rate or (f"{unit} {rates[-1][1]:,.3g}" if rates else f"{unit}: -"), layout=False)
        loss_plot.data = [v for _, v in losses]
        rate_plot.data = [v for _, v in rates]
