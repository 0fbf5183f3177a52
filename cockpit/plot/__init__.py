"""A run's pictures: loss per rank over steps, step rate per rank over time, a rank x time heat map of the
rate, a sweep's trials on one chart; the same chart in the terminal (`cockpit plot`), in the TUI and as a PNG.

    series.py   PURE: a rank's points (bounded), its rate over time, the heat map's cells
    source.py   reads a run's metrics/ (and, for scripts that write none, the rank hook's beats) as they grow
    chart.py    PURE: series -> a chart as a value (lines with labels, axes, or a heat map)
    text.py     a chart -> text, through plotext (the terminal, the TUI)
    png.py      a chart -> PNG, through matplotlib (the optional `plot` extra)
"""
