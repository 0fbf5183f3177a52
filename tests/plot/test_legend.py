"""A sweep's diverged trial stays in sight (issue 33 item 7b): plotext draws the legend over the data in the
top-left corner, where every loss curve starts and where a trial that blows up early goes; the y axis makes
room above the data for it, and a diverged trial says so in its label and the note and is drawn last (on top).
Pure chart values and plotext text (well under a second)."""

from __future__ import annotations

import re

from cockpit.plot import chart as charts
from cockpit.plot.series import Track
from cockpit.plot.text import draw, legend_room


def trial(losses: list[float]):
    track = Track(0)
    for step, loss in enumerate(losses, start=1):
        track.add(step, 1000.0 + step, loss)
    return track.series()


CALM = [2.0 * 0.95**s for s in range(60)]
BLOWN = [2.0 * 1.6**s for s in range(12)] + [float("nan")] * 48  # up from step 1, NaN from step 13


def sweep():
    return charts.trials_chart([("trial 0 --lr 0.01", trial(CALM)), ("trial 1 --lr 1.0", trial(BLOWN)),
                                ("trial 2 --lr 0.03", trial([v * 0.9 for v in CALM]))], "sw: loss per trial")


def test_a_diverged_trial_is_named_drawn_last_and_in_the_note():
    chart = sweep()
    assert [line.label for line in chart.lines] == ["trial 0 --lr 0.01", "trial 2 --lr 0.03",
                                                    "trial 1 --lr 1.0 (diverged)"]
    assert chart.note == "trial 1 --lr 1.0: loss not finite from step 13"
    rising = charts.trials_chart([("t", trial([1.0, 0.8, 1.5, 2.5, 3.0]))], "sw")
    assert rising.lines[0].label == "t (diverged)" and rising.note == "t: loss above 2x its first from step 4"
    again = charts.trials_chart([("t", trial([1.0, 2.5, 0.9, 2.2, 3.0]))], "sw")  # risen since step 4, not 2
    assert again.lines[0].label == "t (diverged)" and again.note == "t: loss above 2x its first from step 4"


def test_a_spike_the_trial_came_back_from_is_not_called_diverged():
    """The new-user pass: a trial at a high learning rate spiked to 279 at step 3, then ended the best of two;
    it was labelled diverged. Only a loss still above 2x its first at the end (or not finite) is."""
    chart = charts.trials_chart([("trial 0 --lr 50.0", trial([1.0, 3.0, 279.0, 0.5, 0.076])),
                                 ("trial 1 --lr 0.01", trial([1.0, 0.9, 0.8, 0.7, 0.6]))], "sw")
    assert [line.label for line in chart.lines] == ["trial 0 --lr 50.0", "trial 1 --lr 0.01"]
    assert chart.note == ""


def test_the_y_axis_makes_room_for_the_legend_above_what_would_be_under_it():
    chart = sweep()
    width, height = 70, 18
    low, top = legend_room(chart, width, height)
    peak = max(BLOWN[:12])
    rows = height - 5
    assert top > peak and (top - peak) / (top - low) * (rows - 1) >= len(chart.lines)  # the peak below the legend
    ticks = [float(t) for t in re.findall(r"^\s*([\d.]+)┤", draw(chart, width, height), re.M)]
    assert max(ticks) > peak, ticks  # drawn so: the axis's top is above the peak
    calm = charts.trials_chart([("a", trial([0.1 * (s + 1) for s in range(60)]))], "up")  # low at the left
    assert legend_room(calm, width, height) is None  # nothing under the legend: the axis as it was
