"""The charts screen (`c` in the run view) on real run directories (tests/tui/chartdata.py: 4 ranks, rank 2 a
straggler for a stretch, rank 3 stalled at the end; a sweep of 3 trials): `m` cycles loss -> rate -> heat ->
GPU, `r` picks a rank and the legend then names only it, escape goes back; the GPU chart maps each rank to its
GPU from the run's logs and job and draws Fleet's readings of it, or says a CPU-only run has none. SVG
snapshots of loss, rate and heat at 80x24 and 160x48, and of a sweep's trials.

Update the snapshots with `pytest tests/tui/test_charts.py --snapshot-update`, then read the SVGs."""

from __future__ import annotations

import pytest
from tui.chartdata import CPU_JOB, END, STALLED, STRAGGLER, T0, TRIAL_LR, make_charts_run, make_charts_sweep
from tui.tuidata import until

from cockpit.plot.chart import HeatChart, LineChart
from cockpit.tui.app import CockpitApp
from cockpit.tui.models import charts as chartsview
from cockpit.tui.screens.charts import ChartsScreen
from cockpit.tui.screens.run_view import RunViewScreen
from cockpit.tui.widgets.heat_map import HeatMap


async def open_charts(pilot, run_dir) -> ChartsScreen:
    """The run view of ``run_dir``, then `c`; returns once the first chart is drawn."""
    app = pilot.app
    app.open_run(run_dir)
    await until(pilot, lambda: isinstance(app.screen, RunViewScreen), what="the run view")
    await pilot.press("c")
    await until(pilot, lambda: isinstance(app.screen, ChartsScreen) and app.screen.shown is not None,
                what="the charts screen's first chart")
    return app.screen


async def show(pilot, metric: str) -> ChartsScreen:
    """Press `m` until ``metric``'s chart is drawn: once per chart at most, each press seen to move on."""
    screen = pilot.app.screen
    for _ in chartsview.METRICS:
        if screen.metric == metric:
            break
        before = screen.metric
        await pilot.press("m")
        await until(pilot, lambda before=before: screen.metric != before, what=f"`m` to leave the {before} chart")
    assert screen.metric == metric, f"`m` went round every chart without reaching {metric}"
    await until(pilot, lambda: screen.shown is not None and screen.shown[0] == metric, what=f"the {metric} chart")
    return screen


def drawn(screen: ChartsScreen) -> tuple:
    return screen.shown[2]


def legend(screen: ChartsScreen) -> list[str]:
    return [line.label for chart in drawn(screen) for line in chart.lines]


async def test_m_cycles_the_charts_and_escape_goes_back(ctx):
    run_dir = make_charts_run(ctx.runs_dir)
    async with CockpitApp(ctx).run_test(size=(120, 36)) as pilot:
        screen = await open_charts(pilot, run_dir)
        assert screen.metric == "loss" and isinstance(drawn(screen)[0], LineChart)
        assert legend(screen) == ["rank 0", "rank 1", "rank 2", "rank 3"]
        assert "loss · all ranks" in str(screen.query_one("#charts-title").content)
        await show(pilot, "rate")
        assert drawn(screen)[0].ylabel == "steps/s" and drawn(screen)[0].x_is_time
        await show(pilot, "heat")
        heat = drawn(screen)[0]
        assert isinstance(heat, HeatChart) and screen.has_class("-heat") and screen.query_one(HeatMap).display
        rows = dict(chartsview_rows(heat))
        assert "·" in rows[str(STALLED)] and "·" not in rows["0"]  # the stall, on its rank's row only
        assert "▒" in rows[str(STRAGGLER)] or "░" in rows[str(STRAGGLER)]  # the straggler's slow stretch
        assert set(rows["0"].strip()) == {"█"}
        await show(pilot, "wait")
        wait = drawn(screen)[0]
        assert isinstance(wait, HeatChart) and wait.flagged == (str(STALLED),)
        assert wait.note == f"rank {STALLED} waits 17% of its time, the others 50%: they wait for rank {STALLED}"
        rows = dict(chartsview_rows(wait))
        assert rows[str(STALLED)].rstrip().endswith("░" * 10) and rows["0"].rstrip().endswith("█" * 10)
        assert "░" in rows[str(STRAGGLER)] and "▓" in rows["0"]  # in SLOW: it hardly waits, the others wait for it
        await show(pilot, "gpu")
        await pilot.press("m")
        await until(pilot, lambda: screen.shown[0] == "loss", what="back to the loss chart")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(pilot.app.screen, RunViewScreen), what="the run view again")


def chartsview_rows(heat: HeatChart) -> list[tuple[str, str]]:
    from cockpit.plot.text import heat_rows

    return [(label, "".join(ch for ch, _ in cells)) for label, cells in heat_rows(heat)]


async def test_r_picks_a_rank_and_the_legend_names_only_it(ctx):
    run_dir = make_charts_run(ctx.runs_dir)
    async with CockpitApp(ctx).run_test(size=(120, 36)) as pilot:
        screen = await open_charts(pilot, run_dir)
        for rank in range(4):
            await pilot.press("r")
            await until(pilot, lambda r=rank: screen.shown[1] == r, what=f"rank {rank} picked")
            assert legend(screen) == [f"rank {rank}"]
            assert f"loss · rank {rank}" in str(screen.query_one("#charts-title").content)
        await pilot.press("r")  # past the last rank: all again
        await until(pilot, lambda: screen.shown[1] is None, what="all ranks")
        assert len(legend(screen)) == 4
        await pilot.press("r", "r", "a")
        await until(pilot, lambda: screen.pick is None and screen.shown[1] is None, what="a: all ranks")
        await pilot.press("r")
        await show(pilot, "heat")  # the pick holds across charts: the heat map has the one row
        assert drawn(screen)[0].heat.labels == ("0",)


async def test_the_gpu_chart_draws_each_ranks_gpu_from_fleet(ctx):
    run_dir = make_charts_run(ctx.runs_dir)  # ranks 0, 1 on gpu-a5000 and 2, 3 on gpu-h100; gpus: [0, 1]
    app = CockpitApp(ctx)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: len(app.history.util("gpu-h100", 0)) >= 2, what="the fleet history")
        screen = await open_charts(pilot, run_dir)
        await show(pilot, "gpu")
        util, mem = drawn(screen)
        assert util.title.endswith("GPU utilisation per rank (%)") and mem.title.endswith("GPU memory per rank (%)")
        # gpu-h100 has one GPU: rank 3's gpu1 has no readings, so no line
        assert [line.label for line in util.lines] == ["rank 0 gpu-a5000:gpu0", "rank 1 gpu-a5000:gpu1",
                                                       "rank 2 gpu-h100:gpu0"]
        assert list(util.lines[2].ys) == app.history.util("gpu-h100", 0)
        assert list(mem.lines[1].ys) == app.history.memory("gpu-a5000", 1)
        assert screen.has_class("-two") and screen.query_one("#chart-b").display
        await pilot.press("r", "r", "r", "r")  # rank 3: its GPU has no readings
        await until(pilot, lambda: screen.shown[1] == 3, what="rank 3 picked")
        assert screen.has_class("-empty")
        assert "no GPU data for this run: Fleet has no readings of gpu-h100:gpu1" in str(
            screen.query_one("#charts-note").content)


async def test_a_cpu_only_run_says_it_has_no_gpu_data(ctx):
    run_dir = make_charts_run(ctx.runs_dir, job=CPU_JOB)
    async with CockpitApp(ctx).run_test(size=(80, 24)) as pilot:
        screen = await open_charts(pilot, run_dir)
        await show(pilot, "gpu")
        assert screen.has_class("-empty") and chartsview.NO_GPU in str(screen.query_one("#charts-note").content)


async def test_a_sweeps_loss_chart_has_its_trials_labelled_with_their_arguments(ctx):
    run_dir = make_charts_sweep(ctx.runs_dir)
    async with CockpitApp(ctx).run_test(size=(120, 36)) as pilot:
        screen = await open_charts(pilot, run_dir)
        assert legend(screen) == [f"trial {i} --lr {lr}" for i, lr in enumerate(TRIAL_LR)]
        assert "all trials" in str(screen.query_one("#charts-title").content)
        await pilot.press("r", "r")
        await until(pilot, lambda: screen.shown[1] == 1, what="trial 1 picked")
        assert legend(screen) == ["trial 1 --lr 0.03"]
        await pilot.press("l")  # a log y axis: a diverged trial would flatten the others
        await until(pilot, lambda: drawn(screen)[0].log_y, what="the log y axis")
        assert str(screen.query_one("#charts-title").content).endswith("trial 1 · log y")
        await show(pilot, "rate")
        assert [line.label for line in drawn(screen)[0].lines] == ["trial 1"]


async def test_the_charts_follow_a_growing_run_and_a_resized_terminal(ctx):
    import json

    run_dir = make_charts_run(ctx.runs_dir)
    async with CockpitApp(ctx).run_test(size=(120, 36)) as pilot:
        screen = await open_charts(pilot, run_dir)
        with open(run_dir / "metrics" / "rank-0.jsonl", "a") as f:  # the next poll (once a second) reads it
            f.write(json.dumps({"step": 500, "loss": 0.05, "time": T0 + END + 1}) + "\n")
        await until(pilot, lambda: drawn(screen)[0].lines[0].xs[-1] == 500.0, what="the new step on the chart")
        await show(pilot, "heat")
        wide = len(drawn(screen)[0].heat.cells[0])
        await pilot.resize_terminal(80, 24)
        await until(pilot, lambda: len(drawn(screen)[0].heat.cells[0]) < wide, what="a narrower heat map")
        assert len(drawn(screen)[0].heat.cells[0]) <= 80 - 9


def test_ranks_map_to_their_local_gpu_through_the_jobs_ids_and_fleets_name_for_this_machine():
    hosts = {0: "node0", 1: "node0", 2: "gpu-b", 3: "gpu-b"}
    assert chartsview.rank_gpus(hosts, None) == {0: ("node0", 0), 1: ("node0", 1), 2: ("gpu-b", 0), 3: ("gpu-b", 1)}
    assert chartsview.rank_gpus(hosts, (2, 5))[1] == ("node0", 5)
    readings = {("localhost", 0), ("localhost", 1), ("gpu-b", 0)}  # Fleet calls this machine localhost
    has = lambda h, i: (h, i) in readings  # noqa: E731
    local = {0: ("node0", 0), 1: ("node0", 1)}  # a local run: every rank on this machine
    assert chartsview.fleet_hosts(local, has, ("localhost",)) == {0: ("localhost", 0), 1: ("localhost", 1)}
    remote = {2: ("gpu-b", 0), 3: ("gpu-b", 1)}  # gpu-b:1 has no readings: it stays gpu-b's, never this machine's
    assert chartsview.fleet_hosts(remote, has, ()) == remote


def test_the_pick_cycles_all_then_each_then_all():
    picks, pick = [], None
    for _ in range(4):
        pick = chartsview.next_pick(pick, [2, 0, 1])
        picks.append(pick)
    assert picks == [0, 1, 2, None] and chartsview.next_pick(None, []) is None
    assert [chartsview.next_metric(m) for m in chartsview.METRICS] == ["rate", "heat", "wait", "gpu", "loss"]


# --- snapshots ---------------------------------------------------------------------------------------------------
SIZES = [(80, 24), (160, 48)]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("metric", ["loss", "rate", "heat", "wait"])
def test_charts_snapshot(snap_compare, ctx, metric, size):
    run_dir = make_charts_run(ctx.runs_dir)

    async def run_before(pilot) -> None:
        await open_charts(pilot, run_dir)
        await show(pilot, metric)
        await pilot.pause()

    assert snap_compare(CockpitApp(ctx), terminal_size=size, run_before=run_before)


def test_sweep_charts_snapshot(snap_compare, ctx):
    run_dir = make_charts_sweep(ctx.runs_dir)

    async def run_before(pilot) -> None:
        await open_charts(pilot, run_dir)
        await pilot.pause()

    assert snap_compare(CockpitApp(ctx), terminal_size=(80, 24), run_before=run_before)


async def test_a_run_without_a_loss_opens_on_its_rate_from_the_hooks_beats(ctx):
    import shutil

    run_dir = make_charts_run(ctx.runs_dir)
    shutil.rmtree(run_dir / "metrics")  # a plain script: no metrics, only the rank hook's beats
    async with CockpitApp(ctx).run_test(size=(100, 30)) as pilot:
        screen = await open_charts(pilot, run_dir)
        await until(pilot, lambda: screen.shown[0] == "rate", what="the rate chart")
        assert drawn(screen)[0].ylabel == "collectives/s" and legend(screen) == [f"rank {r}" for r in range(4)]
        await pilot.press("m")  # the user's own choice from here on
        await until(pilot, lambda: screen.shown[0] == "heat", what="the heat map")


def pictured(screen: ChartsScreen) -> bool:
    """Whether the worker drew the charts' pictures for chart-a's size (known once it was drawn alone)."""
    return screen._ready_looks is not None and screen._ready_looks.plot is not None


# --- what a key costs (issue 29): the charts are built once per poll that brings points ------------------------
async def test_a_key_draws_the_chart_built_at_the_last_poll_and_builds_nothing(ctx):
    run_dir = make_charts_run(ctx.runs_dir)  # a finished run: no poll brings anything after the first
    async with CockpitApp(ctx).run_test(size=(120, 36)) as pilot:
        screen = await open_charts(pilot, run_dir)
        await until(pilot, lambda: all((m, screen._view()) in screen._ready for m in chartsview.METRICS),
                    what="every chart built")
        await until(pilot, lambda: pictured(screen), what="the line charts' pictures drawn")
        ready, builds, version = screen._ready, screen.builds, screen._run_series.version
        series = screen._run_series.series()
        for metric in (*chartsview.METRICS[1:], "loss"):
            await pilot.press("m")
            await until(pilot, lambda m=metric: screen.shown is not None and screen.shown[0] == m, what=metric)
            if metric != "gpu":  # the very chart the poll built (one built since would fail the count below)
                assert screen.shown[2][0] is ready[(metric, screen._view())].chart, metric
        polls = screen.polls
        await until(pilot, lambda: screen.polls >= polls + 2, what="two more polls")  # they find nothing new
        assert screen.builds == builds and screen._ready is ready and screen._run_series.version == version
        assert all(a is b for a, b in zip(screen._run_series.series(), series, strict=True))


async def test_points_appended_are_drawn_and_nothing_else_changes(ctx):
    import json

    run_dir = make_charts_run(ctx.runs_dir)
    async with CockpitApp(ctx).run_test(size=(120, 36)) as pilot:
        screen = await open_charts(pilot, run_dir)
        before = {line.label: (line.xs, line.ys) for line in drawn(screen)[0].lines}
        last = int(before["rank 1"][0][-1])
        new = [{"step": last + i, "loss": 0.01 * i, "time": T0 + END + i} for i in (1, 2, 3)]
        with open(run_dir / "metrics" / "rank-1.jsonl", "a") as f:
            f.writelines(json.dumps(rec) + "\n" for rec in new)
        await until(pilot, lambda: len(drawn(screen)[0].lines[1].xs) > len(before["rank 1"][0]),
                    what="the new points on the chart")
        after = {line.label: (line.xs, line.ys) for line in drawn(screen)[0].lines}
        assert after["rank 1"] == (before["rank 1"][0] + tuple(float(r["step"]) for r in new),
                                   before["rank 1"][1] + tuple(r["loss"] for r in new))
        assert {k: v for k, v in after.items() if k != "rank 1"} == {k: v for k, v in before.items() if k != "rank 1"}


async def test_the_worker_drawn_picture_is_what_the_widget_draws_itself(ctx):
    from cockpit.tui.widgets.chart_plot import ChartPlot, prerender

    run_dir = make_charts_run(ctx.runs_dir)
    async with CockpitApp(ctx).run_test(size=(120, 36)) as pilot:
        screen = await open_charts(pilot, run_dir)
        await until(pilot, lambda: pictured(screen), what="the line charts' pictures drawn")
        await show(pilot, "rate")  # drawn from the picture the poll's worker drew
        plot = screen.query_one("#chart-a", ChartPlot)
        await until(pilot, lambda: plot._drawn is not None, what="the worker's picture shown")
        picture = plot.render()
        assert picture is plot._drawn[1]
        plot._drawn = None  # the widget draws it itself now, as textual-plotext does
        assert plot.render() == picture
        width, height = plot.size.width, plot.size.height
        assert prerender(drawn(screen)[0], width, height, plot.theme_name())[1] == picture


async def test_the_worker_built_heat_map_is_what_the_widget_builds_itself(ctx):
    from cockpit.tui.widgets.heat_map import heat_text

    run_dir = make_charts_run(ctx.runs_dir)
    async with CockpitApp(ctx).run_test(size=(120, 36)) as pilot:
        screen = await open_charts(pilot, run_dir)
        await until(pilot, lambda: pictured(screen), what="the charts' pictures drawn")
        await show(pilot, "wait")
        heat = screen.query_one(HeatMap)
        read = screen._ready[("wait", screen._view())]
        assert read.drawn is not None and read.drawn[0] == heat.styles_now()
        assert read.drawn[1] == heat_text(drawn(screen)[0], heat.styles_now()) == heat.text(drawn(screen)[0])


async def test_the_run_view_under_the_charts_applies_no_lines_until_it_shows_again(ctx):
    """A log storm behind the charts takes no time from them: the covered run view leaves the lines in the
    feed, and shows them once it is back."""
    from dataclasses import replace

    from cockpit.run.store import read_status, write_status
    from cockpit.tui.widgets.rank_log import RankLog

    run_dir = make_charts_run(ctx.runs_dir)
    write_status(run_dir, replace(read_status(run_dir), state="running", ended=None, exit_code=None))  # followed
    async with CockpitApp(ctx).run_test(size=(120, 36)) as pilot:
        app = pilot.app
        app.open_run(run_dir)
        await until(pilot, lambda: isinstance(app.screen, RunViewScreen), what="the run view")
        run_view = app.screen
        await until(pilot, lambda: bool(run_view.query(RankLog)), what="the run view's log")
        log = run_view.query_one(RankLog)
        await until(pilot, lambda: any("start rank=0" in line for line in log.lines), what="the first lines")
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ChartsScreen) and app.screen.shown is not None,
                    what="the charts screen's first chart")
        shown = len(log.lines)
        with open(run_dir / "logs" / "rank-0.gpu-a5000.log", "a") as f:
            f.write("behind the charts\n")
        await until(pilot, lambda: run_view._apply_on_resume, what="the feed's batch held back")
        assert len(log.lines) == shown
        await pilot.press("escape")
        await until(pilot, lambda: any("behind the charts" in line for line in log.lines), what="the held line")


async def test_the_strips_the_worker_prepared_are_what_textual_renders_itself(ctx):
    """A key swaps in strips a worker prepared (widgets.ready_strips): for a line chart and both heat maps they
    are textual's own rendering of the same picture in that widget, line for line."""
    from textual.content import Content
    from textual.visual import Visual

    from cockpit.tui.widgets.chart_plot import ChartPlot

    run_dir = make_charts_run(ctx.runs_dir)
    async with CockpitApp(ctx).run_test(size=(120, 36)) as pilot:
        screen = await open_charts(pilot, run_dir)
        await until(pilot, lambda: pictured(screen), what="the line charts' pictures drawn")
        for metric, widget in (("rate", screen.query_one("#chart-a", ChartPlot)), ("heat", screen.query_one(HeatMap)),
                               ("wait", screen.query_one(HeatMap))):
            await show(pilot, metric)
            await until(pilot, lambda w=widget: w._fits() is not None, what=f"the {metric} chart's strips in use")
            ready, (width, height) = widget._fits(), widget.size
            picture = screen._ready[(metric, screen._view())].drawn[1]
            own = Visual.to_strips(widget, Content.from_rich_text(picture, console=pilot.app.console), width, height,
                                   widget.visual_style)
            assert [widget.render_line(y) for y in range(len(own))] == own, metric
            assert own and list(ready.strips[:height]) == own, metric
