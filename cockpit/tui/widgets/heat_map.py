"""The rank x time heat map of a run's rate (cockpit.plot.chart.HeatChart) as shaded cells: the same rows,
characters and legend as `cockpit plot --metric heat` (cockpit.plot.text.heat_rows), coloured per level by the
component classes below, whose colours come from the theme through app.tcss."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from cockpit.plot.chart import HeatChart
from cockpit.plot.text import HEAT_LEGEND, heat_rows, label_width

_GLYPH_LEVEL = {"·": 1, "░": 2, "▒": 3, "▓": 4, "█": 5}
LEVELS = ("heat-map--stalled", "heat-map--slowest", "heat-map--slow", "heat-map--near", "heat-map--full")


class HeatMap(Static):
    """Level 0 (no data) is blank; 1 stalled; 2..5 from slowest to full speed (see cockpit.plot.text)."""

    COMPONENT_CLASSES = {*LEVELS, "heat-map--axis"}

    def show(self, chart: HeatChart) -> None:
        self.update(self.text(chart))

    def text(self, chart: HeatChart) -> Text:
        h = chart.heat
        out = Text(chart.title, style="bold", no_wrap=True, overflow="crop")
        axis = self.get_component_rich_style("heat-map--axis")
        if not h.labels:
            out.append(f"\n{chart.note}", style=axis)
            return out
        styles = [self.get_component_rich_style(name) for name in LEVELS]
        lw = label_width(chart)
        for label, cells in heat_rows(chart):
            out.append(f"\n{label:>{lw - 1}} ", style=axis)
            for ch, level in cells:
                out.append(ch, style=styles[level - 1] if level else "")
        cols = len(h.cells[0])
        left, right = "0 s", f"{h.t1 - h.t0:.0f} s"
        out.append("\n" + " " * lw + left + right.rjust(max(1, cols - len(left))), style=axis)
        median = f"of the median, {h.median:.3g} {h.unit}" if h.median else f"(no {h.unit} yet)"
        out.append("\n")
        for ch in HEAT_LEGEND:  # the legend's glyphs in their colours
            level = _GLYPH_LEVEL.get(ch)
            out.append(ch, style=styles[level - 1] if level else axis)
        out.append(f" {median}", style=axis)
        if chart.note:
            out.append(f"\n{chart.note}", style=axis)
        return out
