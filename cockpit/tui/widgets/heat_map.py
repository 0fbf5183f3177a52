"""The rank x time heat maps (cockpit.plot.chart.HeatChart) as shaded cells: the same rows, characters and
legend as `cockpit plot --metric heat|wait` (cockpit.plot.text), coloured by the component classes below, whose
colours come from the theme through app.tcss: a rate per level (stalled, slow ... full speed); a wait share in
one colour, with the rank the others wait for pointed at. A worker may hand it the map already turned into
strips (cockpit.tui.widgets.ready_strips): then showing it is a swap, no conversion on the UI thread."""

from __future__ import annotations

from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from cockpit.plot.chart import HeatChart
from cockpit.plot.series import WAIT
from cockpit.plot.text import heat_axis, heat_legend, heat_rows, row_label
from cockpit.tui.widgets.ready_strips import Ready, ReadyStrips

_GLYPH_LEVEL = {"·": 1, "░": 2, "▒": 3, "▓": 4, "█": 5}
LEVELS = ("heat-map--stalled", "heat-map--slowest", "heat-map--slow", "heat-map--near", "heat-map--full")


class HeatMap(ReadyStrips, Static):
    """Level 0 (no data) is blank; 1 stalled; 2..5 from slowest to full speed (see cockpit.plot.text)."""

    COMPONENT_CLASSES = {*LEVELS, "heat-map--axis", "heat-map--wait", "heat-map--flagged"}

    def show(self, chart: HeatChart, drawn: tuple[HeatStyles, Text] | None = None, ready: Ready | None = None) -> None:
        """Draw ``chart``; ``drawn``: its text from ``heat_text`` (e.g. built by a worker), used when it was
        built with the styles this widget has now; ``ready``: that text as textual's Content and strips."""
        styles = self.styles_now()
        if drawn is not None and drawn[0] == styles:
            self._ready = ready
            self.update(drawn[1] if ready is None else ready.content)
            return
        self._ready = None
        self.update(heat_text(chart, styles))

    def styles_now(self) -> HeatStyles:
        """The styles of the levels, the axis, a wait share and the flagged row, from the theme (UI thread)."""
        return HeatStyles(tuple(self.get_component_rich_style(name) for name in LEVELS),
                          self.get_component_rich_style("heat-map--axis"),
                          self.get_component_rich_style("heat-map--wait"),
                          self.get_component_rich_style("heat-map--flagged"))

    def text(self, chart: HeatChart) -> Text:
        return heat_text(chart, self.styles_now())


@dataclass(frozen=True)
class HeatStyles:
    levels: tuple[Style, ...]
    axis: Style
    wait: Style
    flagged: Style


def heat_text(chart: HeatChart, st: HeatStyles) -> Text:
    """The heat map as styled text; reads no widget state, so a worker can build it."""
    h = chart.heat
    out = Text(chart.title, style="bold", no_wrap=True, overflow="crop")
    axis, waiting, flagged, styles = st.axis, st.wait, st.flagged, st.levels
    if not h.labels:
        out.append(f"\n{chart.note}", style=axis)
        return out
    wait = h.kind == WAIT
    for label, cells in heat_rows(chart):
        out.append("\n" + row_label(chart, label), style=flagged if label in chart.flagged else axis)
        for ch, level in cells:
            out.append(ch, style=(waiting if wait else styles[level - 1]) if level else "")
    out.append("\n" + heat_axis(chart), style=axis)
    for line in heat_legend(chart):  # the legend's glyphs in their colours
        out.append("\n")
        for ch in line:
            glyph = _GLYPH_LEVEL.get(ch)
            out.append(ch, style=(waiting if wait else styles[glyph - 1]) if glyph else axis)
    if chart.note:
        out.append(f"\n{chart.note}", style=flagged if chart.flagged else axis)
    return out
