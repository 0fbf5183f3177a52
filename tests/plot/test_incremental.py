"""The chart data kept between polls (cockpit.plot.series.Track, cockpit.plot.source.RunSeries): a poll that
brings nothing leaves every built series as it was (the same objects: nothing re-read, sorted or copied), a
poll that brings points adds exactly them, and the charts built from series kept across many polls equal the
ones built from scratch by a reader that read the whole files at once."""

from __future__ import annotations

import json
from pathlib import Path

from cockpit.plot import chart as charts
from cockpit.plot.series import BEATS, Track, band
from cockpit.plot.source import RunSeries

T0 = 1_700_000_000.0


def append(run: Path, rank: int, steps: range, rate: float = 10.0) -> None:
    (run / "metrics").mkdir(parents=True, exist_ok=True)
    with open(run / "metrics" / f"rank-{rank}.jsonl", "a") as f:
        for s in steps:
            loss = 2.0 / (s + 1) + 0.01 * rank + (0.003 * (s % 7))
            f.write(json.dumps({"step": s, "time": T0 + s / (rate - rank * 0.1), "loss": loss}) + "\n")


def test_a_poll_that_brings_nothing_keeps_every_built_series(tmp_path):
    for rank in range(4):
        append(tmp_path, rank, range(0, 50))
    reader = RunSeries(tmp_path)
    assert reader.poll() and reader.version == 1
    first, span = reader.series(), reader.span()
    assert not reader.poll() and reader.version == 1  # nothing appended: nothing read, nothing built
    again = reader.series()
    assert again is not first and again == first  # a new list (callers may change theirs) ...
    assert all(a is b for a, b in zip(again, first, strict=True))  # ... of the very same series
    assert reader.span() is span
    assert reader.series([2])[0] is first[2]


def test_new_points_are_exactly_added_and_only_their_ranks_series_is_built_again(tmp_path):
    for rank in range(3):
        append(tmp_path, rank, range(0, 40))
    reader = RunSeries(tmp_path)
    reader.poll()
    before = reader.series()
    append(tmp_path, 1, range(40, 47))
    assert reader.poll() and reader.version == 2
    after = reader.series()
    assert after[0] is before[0] and after[2] is before[2]  # untouched ranks: not rebuilt
    assert after[1].counts == before[1].counts + tuple(range(40, 47))
    assert after[1].times[:40] == before[1].times and len(after[1].times) == 47
    assert reader.span() == (T0, max(after[1].times[-1], after[0].times[-1], after[2].times[-1]))


def test_a_tracks_span_follows_a_replaced_step_and_the_thinning():
    track = Track(0, keep=4)
    track.add(0, 10.0, 1.0)
    track.add(1, 11.0, 1.0)
    assert track.times() == (10.0, 11.0)
    track.add(0, 12.0, 0.5)  # a resumed run's step 0 again, later: its first record (the earliest) is gone
    assert track.times() == (11.0, 12.0)
    for s in range(2, 20):
        track.add(s, 20.0 + s, 0.1)
    series = track.series()
    assert track.times() == (min(series.times), max(series.times))
    beats = Track(0, BEATS)
    for i in range(5):
        beats.add(i, 100.0 + i, 0.1 * i)
    assert beats.times() == (100.0, 104.0) and beats.series() is beats.series()


def test_charts_from_series_kept_across_polls_equal_charts_built_from_scratch(tmp_path):
    """16 ranks (a band, not lines), read in 9 polls as the files grow, some lines cut in half at a poll."""
    reader = RunSeries(tmp_path, keep=60)
    half = json.dumps({"step": 10_000, "time": T0 + 1000, "loss": 0.5}) + "\n"
    for chunk in range(9):
        if chunk == 5:  # the rest of the record cut at the last poll
            with open(tmp_path / "metrics" / "rank-5.jsonl", "a") as f:
                f.write(half[len(half) // 2:])
        for rank in range(16):
            append(tmp_path, rank, range(chunk * 30, chunk * 30 + 30))
        if chunk == 4:
            with open(tmp_path / "metrics" / "rank-5.jsonl", "a") as f:
                f.write(half[:len(half) // 2])
        reader.poll()
        assert 10_000 not in reader.series([5])[0].counts or chunk >= 5
    assert 10_000 in reader.series([5])[0].counts  # the record cut in two, read whole
    reader.poll()
    fresh = RunSeries(tmp_path, keep=60)
    fresh.poll_all()
    assert reader.series() == fresh.series() and reader.span() == fresh.span()
    for metric in ("loss", "rate", "heat"):
        kept = charts.build(metric, reader.series(), "run", 120, 30, span=reader.span())
        scratch = charts.build(metric, fresh.series(), "run", 120, 30, span=fresh.span())
        assert kept == scratch, metric
    loss = charts.build("loss", reader.series(), "run", 120, 30)
    xs, mean, lo, hi = band([tuple((float(x), y) for x, y in s.losses()) for s in fresh.series()], 120)
    assert [line.role for line in loss.lines] == ["max", "mean", "min"]
    assert loss.lines[1].xs == xs and loss.lines[1].ys == mean
    assert loss.lines[0].ys == hi and loss.lines[2].ys == lo


def test_a_poll_of_some_ranks_reads_only_theirs_and_the_rest_later_from_the_start(tmp_path):
    """The run view's side panel polls the ranks it may show (cockpit.tui.models.run_view.side_ranks), not all
    4,096: the others' files are not read, and a later poll of them reads them whole."""
    for rank in range(6):
        append(tmp_path, rank, range(0, 20))
    reader = RunSeries(tmp_path)
    assert reader.poll(only={0, 1}) and reader.ranks() == [0, 1]
    append(tmp_path, 4, range(20, 30))
    assert reader.poll(only={4}) and reader.ranks() == [0, 1, 4]
    assert reader.series([4])[0].counts == tuple(range(0, 30))
    whole = RunSeries(tmp_path)
    whole.poll()
    assert reader.poll() and reader.series() == whole.series()  # the rest caught up: as if read at once


def test_the_side_panel_reads_the_viewed_rank_and_the_first_few():
    from cockpit.tui.models.log_store import MERGED
    from cockpit.tui.models.run_view import SIDE_FIRST, side_ranks

    assert side_ranks(MERGED) == set(SIDE_FIRST)
    assert side_ranks(("n7", 4000)) == {*SIDE_FIRST, 4000}
    assert side_ranks(("n7", "agent")) == set(SIDE_FIRST)
