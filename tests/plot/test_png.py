"""cockpit.plot.png on charts built from series: every chart kind becomes a PNG that opens, the file appears
whole or not at all, and only a PNG is ever replaced."""

from __future__ import annotations

import pytest
from matplotlib.image import imread
from plot.test_series import beats, metrics_series

from cockpit.plot import chart as charts
from cockpit.plot.png import PNG_MAGIC, PngError, write_png


def chart_of(metric: str):
    series = [metrics_series(r, 10.0, 120, loss0=1 + r) for r in range(12)]
    return charts.build(metric, series, "run", 100, 30, beats=[beats(r, 0.5 if r else 0.05, 20) for r in range(12)])


@pytest.mark.parametrize("metric", charts.METRICS)
def test_each_chart_becomes_a_png_that_opens(tmp_path, metric):
    path = write_png(chart_of(metric), tmp_path / f"{metric}.png")
    pixels = imread(path)
    assert pixels.shape == (500, 1000, 4)
    rgb = pixels[:, :, :3]
    assert ((rgb.max(axis=2) - rgb.min(axis=2)) > 0.3).sum() > 500  # coloured marks, not a blank canvas
    assert [p.name for p in tmp_path.iterdir()] == [f"{metric}.png"]  # no temporary file left


def test_a_png_is_replaced_and_anything_else_is_not(tmp_path):
    png = tmp_path / "loss.png"
    write_png(chart_of("loss"), png)
    first = png.stat().st_mtime_ns
    write_png(chart_of("rate"), png)
    assert png.read_bytes().startswith(PNG_MAGIC) and png.stat().st_mtime_ns >= first
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    with pytest.raises(PngError, match="is there and is not a PNG; not replacing it"):
        write_png(chart_of("loss"), notes)
    assert notes.read_text() == "mine"


def test_a_directory_that_is_not_there_is_one_line(tmp_path):
    with pytest.raises(PngError, match=r"nodir/x.png: cannot write it: No such file or directory"):
        write_png(chart_of("loss"), tmp_path / "nodir" / "x.png")
    with pytest.raises(PngError, match="is a directory"):
        write_png(chart_of("loss"), tmp_path)
