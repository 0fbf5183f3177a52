"""The numbers behind the charts (cockpit.plot.series, .chart, .source): bounded tracks, rates that survive a
resume, the heat map's cells for a straggler and a stall, the wait share that names a straggler, and the
incremental reader over files that grow, shrink and hold half-written lines."""

from __future__ import annotations

import json
import math
import tracemalloc

from cockpit.plot import chart as charts
from cockpit.plot.series import BEATS, RankSeries, Track, band, heat, straggler, thin
from cockpit.plot.source import RunSeries
from cockpit.plot.text import draw, heat_rows


def metrics_series(rank: int, rate: float, steps: int, t0: float = 1000.0, loss0: float = 1.0) -> RankSeries:
    track = Track(rank)
    for s in range(steps):
        track.add(s, t0 + s / rate, loss0 / (s + 1))
    return track.series()


def beats(rank: int, share: float, seconds: int, t0: float = 1000.0, per_s: int = 10) -> RankSeries:
    """A rank that waits ``share`` of each second in collectives and calls ``per_s`` of them a second."""
    track = Track(rank, BEATS)
    for i in range(seconds + 1):
        track.add(i * per_s, t0 + i, share * i)
    return track.series()


def test_a_track_stays_bounded_and_keeps_the_whole_run():
    track = Track(0, keep=100)
    for s in range(10_000):
        track.add(s, 1000.0 + s, 1.0)
    series = track.series()
    assert len(track) <= 200
    assert series.counts[0] == 0 and series.counts[-1] == 9999  # both ends of the run survive the thinning
    assert list(series.counts) == sorted(series.counts)


def test_a_tracks_memory_does_not_grow_with_the_run():
    def peak(points: int) -> int:
        tracemalloc.start()
        track = Track(0, keep=500)
        for s in range(points):
            track.add(s, float(s), 0.5)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    small, large = peak(5_000), peak(50_000)
    assert large < 1.5 * small, (small, large)


def test_a_resumed_runs_repeated_steps_keep_their_last_record_and_the_rate_skips_the_jump_back():
    track = Track(0)
    for s in range(10):  # first attempt: 10 steps/s, crashes after step 9
        track.add(s, 100.0 + s / 10, 2.0)
    for s in range(5, 15):  # resumed from the step-5 checkpoint, 100 s later, at 5 steps/s
        track.add(s, 200.0 + (s - 5) / 5, 1.0)
    series = track.series()
    assert series.counts == tuple(range(15))
    assert series.loss[7] == 1.0 and series.loss[2] == 2.0
    rates = [r for _, r in series.rate()]
    assert all(r >= 0 for r in rates)
    assert math.isclose(rates[-1], 5.0)


def test_rate_with_at_most_intervals_is_the_exact_mean_over_each():
    track, t = Track(0), 10.0
    for s in range(101):
        track.add(s, t, None)
        t += 0.01 if s % 2 else 0.03  # jittery: 0.01 s and 0.03 s steps, 50 steps/s on average
    coarse = track.series().rate(at_most=10)
    assert len(coarse) == 10
    assert all(math.isclose(r, 50.0) for _, r in coarse), coarse


def test_the_heat_map_shows_a_stalled_rank_as_no_progress_while_the_others_go_on():
    healthy = [metrics_series(r, 10.0, 200) for r in (0, 1, 3)]
    stalled = metrics_series(2, 10.0, 60)  # stops at 6 s of 20
    chart = charts.heat_chart(healthy[:2] + [stalled] + healthy[2:], "t", columns=40, rows=10)
    rows = dict(heat_rows(chart))
    assert chart.heat.labels == ("0", "1", "2", "3")
    assert "".join(ch for ch, _ in rows["0"]).strip() == "█" * 40
    tail = "".join(ch for ch, _ in rows["2"][-20:])
    assert set(tail) == {"·"}, tail
    text = draw(chart, 60, 10)
    assert "· no progress" in text and "100% = the median, 10 steps/s" in text
    assert "blank: not started or ended" in text  # the blank cells are said too (the new-user pass, issue 33)
    ended = charts.heat_chart(healthy[:2] + [stalled] + healthy[2:], "t", columns=40, rows=10, ended={2})
    assert set("".join(ch for ch, _ in dict(heat_rows(ended))["2"][-20:])) == {" "}  # it exited: done, not stuck


def test_a_rank_starting_up_is_no_data_not_a_stall():
    track = Track(0, BEATS)
    for i in range(20):
        track.add(0 if i < 8 else (i - 8) * 10, 100.0 + i, 0.0)  # no collective for 8 s (model load), then 10/s
    grid = heat([track.series(), beats(1, 0.1, 19, t0=100.0)], columns=19, rows=4)
    assert grid.cells[0][:6] == (None,) * 6 and grid.cells[0][-1] == 10.0


def test_the_heat_map_groups_many_ranks_and_a_group_shows_its_slowest():
    series = [metrics_series(r, 10.0, 100) for r in range(64)]
    series[37] = metrics_series(37, 3.0, 30)  # a third of the others' rate, over the same 10 s
    grid = heat(series, columns=20, rows=16)
    assert len(grid.labels) == 16 and grid.labels[9] == "36-39"
    slow_row = grid.cells[9]
    assert all(v is not None and v < 0.4 * grid.median for v in slow_row[1:]), slow_row


def test_the_wait_share_names_the_rank_the_others_wait_for():
    series = [beats(0, 0.6, 30), beats(1, 0.05, 30), beats(2, 0.55, 30), beats(3, 0.65, 30)]
    rank, least, others = straggler(series)
    assert rank == 1 and math.isclose(least, 0.05) and math.isclose(others, 0.6)
    chart = charts.wait_chart(series, "w", columns=30, rows=8)
    assert chart.note == "rank 1 waits 5% of its time, the others 60%: they wait for rank 1"
    rows = dict(heat_rows(chart))
    assert {ch for ch, _ in rows["1"][1:]} == {"░"} and {ch for ch, _ in rows["0"][1:]} == {"▓"}


def test_no_straggler_when_nobody_waits_much_or_all_wait_alike():
    assert straggler([beats(0, 0.02, 10), beats(1, 0.0, 10)]) is None  # compute-bound, nobody waits
    assert straggler([beats(0, 0.5, 10), beats(1, 0.45, 10)]) is None
    assert charts.wait_chart([beats(0, 0.5, 10), beats(1, 0.45, 10)], "w", 20, 5).note == "no rank stands out"


def test_many_ranks_become_a_mean_with_a_min_max_band():
    series = [metrics_series(r, 10.0, 50, loss0=1.0 + r / 10) for r in range(16)]
    chart = charts.loss_chart(series, "loss", width=60)
    assert [line.role for line in chart.lines] == ["max", "mean", "min"]
    high, mean, low = chart.lines
    assert all(lo <= m <= hi for lo, m, hi in zip(low.ys, mean.ys, high.ys, strict=True))
    assert high.label == "max of 16" and mean.label == "mean of 16"
    few = charts.loss_chart(series[:3], "loss", width=60)
    assert [line.label for line in few.lines] == ["rank 0", "rank 1", "rank 2"]


def test_a_nan_loss_is_said_not_plotted():
    track = Track(1)
    for s in range(10):
        track.add(s, 100.0 + s, 1.0 if s < 6 else float("nan"))
    chart = charts.loss_chart([metrics_series(0, 10.0, 10), track.series()], "loss")
    assert chart.note == "rank 1: loss not finite from step 6"
    assert len(chart.lines[1].ys) == 6


def test_band_and_thin_keep_shape_and_bounds():
    xs, mean, lo, hi = band([((0.0, 1.0), (1.0, 3.0)), ((0.0, 2.0), (1.0, 5.0))], buckets=2)
    assert mean == (1.5, 4.0) and lo == (1.0, 3.0) and hi == (2.0, 5.0)
    points = tuple((float(i), 1.0) for i in range(1000))
    points = points[:3] + ((3.0, 50.0),) + points[4:]  # a one-point peak, as the first steps' loss
    thinned = thin(points, 50)
    assert len(thinned) <= 100 and (3.0, 50.0) in thinned and thin(points[:10], 50) == points[:10]
    assert list(thinned) == sorted(thinned)


def test_an_empty_run_gives_a_note_not_an_error():
    for metric in charts.METRICS:
        chart = charts.build(metric, [], "run", 80, 24)
        assert chart.note, metric
        assert draw(chart, 80, 24).strip()


def test_the_reader_reads_growing_files_half_lines_and_a_file_that_starts_over(tmp_path):
    (tmp_path / "metrics").mkdir()
    (tmp_path / "logs").mkdir()
    path = tmp_path / "metrics" / "rank-0.jsonl"
    rec = [json.dumps({"step": s, "time": 100.0 + s, "loss": 1.0 / (s + 1)}) for s in range(4)]
    odd = [json.dumps({"step": -5, "time": 100.5, "loss": 0.5}), json.dumps({"step": 60, "time": 0, "loss": 0.5})]
    path.write_text(rec[0] + "\n" + rec[1] + "\nnot json\n" + "\n".join(odd) + "\n" + rec[2][:10])  # odd: no writer
    # makes these (a negative step, time 0); they would stretch the axes to nothing
    reader = RunSeries(tmp_path)
    assert reader.poll() and reader.series()[0].counts == (0, 1)
    with open(path, "a") as f:
        f.write(rec[2][10:] + "\n" + rec[3] + "\n")
    assert reader.poll() and reader.series()[0].counts == (0, 1, 2, 3)
    assert not reader.poll()  # nothing new
    beat = tmp_path / "logs" / "rank-0.vm.beat"
    beat.write_text("".join(json.dumps({"t": 100.0 + i, "n": 10 * i, "sync": 0.5 * i, "in": None}) + "\n"
                            for i in range(300)))
    reader.poll()
    assert len(reader.beats()[0].counts) == 300
    beat.write_text(json.dumps({"t": 500.0, "n": 3000, "sync": 150.0, "in": "all_reduce", "since": 499.0}) + "\n")
    reader.poll()  # the hook started the beat file over: the points already read stay
    b = reader.beats()[0]
    assert b.counts[-1] == 3000 and len(b.counts) == 301 and b.waited[-1] == 151.0
    assert reader.source() == "metrics"


def test_a_run_without_metrics_plots_its_beats_as_collectives_per_second(tmp_path):
    (tmp_path / "logs").mkdir()
    for rank in (0, 1):
        (tmp_path / "logs" / f"rank-{rank}.node1.beat").write_text("".join(
            json.dumps({"t": 100.0 + i, "n": 20 * i, "sync": 0.1 * i}) + "\n" for i in range(20)))
    reader = RunSeries(tmp_path)
    reader.poll_all()
    assert reader.source() == "beats"
    chart = charts.build("rate", reader.series(), "run", 80, 20)
    assert chart.ylabel == "collectives/s" and all(math.isclose(y, 20.0) for y in chart.lines[0].ys)
