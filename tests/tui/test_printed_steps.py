"""Issue 33: the rank table of a script that prints its steps (``plain: rank 0 step 250 loss 0.02``, the README's
own example scripts) said STEP 0 and no rate: the watchdog counts only cockpit's metrics, else the hook's
collectives. The table now takes the step and rate of the rank's printed lines where it has no metrics, the step
the charts give the same lines (cockpit.plot.printed), the rate the watchdog's way (looks a second apart)."""

from __future__ import annotations

from tui.tuidata import until

from cockpit.logs.filetail import Line
from cockpit.logs.tail import Batch
from cockpit.plot.sources import PrintedLines
from cockpit.run.progress import RankProgress
from cockpit.run.store import RunStatus, create_run_dir, write_status
from cockpit.tui.app import CockpitApp
from cockpit.tui.models.context import Context
from cockpit.tui.models.feed_state import FeedState
from cockpit.tui.models.fleet_feed import FixedFleet
from cockpit.tui.models.printed_progress import COUNT_MOST, WINDOW, PrintedProgress, PrintedSteps
from cockpit.tui.models.rank_table import rank_rate, rank_step, shown_progress
from cockpit.tui.screens.run_view import RunViewScreen

T0 = 1_790_000_000.0


def test_a_ranks_printed_step_and_its_rate_over_looks_a_second_apart():
    steps = PrintedSteps()
    # 10 steps a second, a line every 5 steps, read as they come (every 0.5 s)
    for i in range(1, 41):
        assert steps.feed(("n", 0), [(f"plain: rank 0 step {5 * i} loss 0.{i:04d}", T0 + 0.5 * i)])
    got = steps.progress(("n", 0))
    assert got is not None and got.step == 200 and got.rate == 10.0
    assert got.rate_at(got.at + WINDOW) == 10.0 and got.rate_at(got.at + WINDOW + 1) is None  # printed no more
    assert steps.progress(("n", 1)) is None  # nothing printed


def test_a_history_read_in_one_go_is_one_look_not_a_rate():
    steps = PrintedSteps()
    for start in range(0, 3000, 500):  # in batches, as the feed reads a long history
        steps.feed(("n", 0), [(f"step {i} loss=0.5", T0 + i * 1e-4) for i in range(start + 1, start + 501)])
    got = steps.progress(("n", 0))
    assert got == PrintedProgress(3000, T0 + 0.05, None)  # not 3,000 steps in 0.3 s
    steps.feed(("n", 0), [("step 3020 loss=0.4", T0 + 2.05)])
    assert steps.progress(("n", 0)).rate == 10.0  # the next look a second on: (3020 - 3000) / 2 s
    steps.feed(("n", 0), [("step 2900 loss=0.6", T0 + 4.0)])  # a new attempt, from its checkpoint
    assert steps.progress(("n", 0)) == PrintedProgress(2900, T0 + 4.0, None)
    steps.feed(("n", 0), [("step 2920 loss=0.6", T0 + 6.0)])
    assert steps.progress(("n", 0)).rate == 10.0


def test_the_step_is_the_one_the_charts_give_the_same_log(tmp_path):
    """Lines without a step of their own are counted; a bar's frames are read each on its own; prose, NCCL's
    numbers and the agent's lines count for nothing: the same as cockpit.plot.sources.PrintedLines reads."""
    text = ["rank 0 up", "{'loss': 0.9, 'learning_rate': 4e-05, 'epoch': 0.1}", "NCCL INFO cudaDev 0 busId 1000",
            "the loss 0.5 was fine", "{'loss': 0.8, 'learning_rate': 4e-05, 'epoch': 0.2}",
            "loss=0.7\rloss=0.6", "{'eval_loss': 0.1}"]
    run_dir = create_run_dir(tmp_path / "runs", "printed-20270101-000000-0001")
    (run_dir / "logs" / "rank-0.n.log").write_text("\n".join(text) + "\n")
    charts = PrintedLines(run_dir).poll(())[0][0]
    steps = PrintedSteps()
    steps.feed(("n", 0), [(t, T0) for t in text])
    assert [p[0] for p in charts] == [1, 2, 3, 4] and steps.progress(("n", 0)).step == 4
    assert not steps.feed(("n", "agent"), [("step 5 loss=1", T0)]) and steps.progress(("n", "agent")) is None


def test_a_storm_of_lines_that_name_their_step_is_read_from_its_end():
    """64 ranks x 1,000 lines/s of ``step=N loss=X``: a batch's last line says the step; the lines before it are
    not parsed (here, unparsable ones before it change nothing). Past COUNT_MOST lines without a step of their
    own in one batch, the rank's printed step is given up (the watchdog's figure shows)."""
    steps = PrintedSteps()
    batch = [("loss=oops", T0)] * 5 + [(f"step={i} loss=0.1 samples/s=1791.8", T0) for i in range(1, 1001)]
    assert steps.feed(("n", 0), batch) and steps.progress(("n", 0)).step == 1000
    counted = PrintedSteps()
    counted.feed(("n", 0), [("{'loss': 0.5}", T0)] * 10)
    assert counted.progress(("n", 0)).step == 10
    assert not counted.feed(("n", 0), [("{'loss': 0.5}", T0 + 1)] * (COUNT_MOST + 1))
    assert counted.progress(("n", 0)) is None and not counted.feed(("n", 0), [("{'loss': 0.5}", T0 + 2)])


def test_the_feed_sends_each_ranks_printed_progress_with_its_counts():
    state = FeedState()
    state.on_batch(Batch([Line(("n", 0), "step 10 loss=2.0", 0, 0, T0), Line(("n", 1), "hello", 0, 0, T0)]))
    state.on_batch(Batch([Line(("n", 0), "step 20 loss=1.5", 1, 17, T0 + 1.5)]))
    stats = state.take().stats
    assert stats[("n", 0)].printed == PrintedProgress(20, T0 + 1.5, round(10 / 1.5, 3))
    assert stats[("n", 1)].printed is None


def test_the_table_shows_printed_steps_where_the_watchdog_has_no_metrics():
    printed = PrintedProgress(250, T0, 207.0)
    syncs = RankProgress("n", "running", step=70, step_source="syncs", rate=20.0, flag="straggler")
    shown = shown_progress(syncs, printed, "n", T0 + 1)
    assert (rank_step(shown), rank_rate(shown), shown.step_source, shown.flag) == ("250", "207", "printed",
                                                                                   "straggler")
    assert shown_progress(None, printed, "n", T0 + 1) == RankProgress("n", "unknown", step=250,
                                                                      step_source="printed", rate=207.0)
    assert rank_rate(shown_progress(syncs, printed, "n", T0 + WINDOW + 1)) == ""  # no step for a window: no rate
    metrics = RankProgress("n", "running", step=30, step_source="metrics", rate=3.0)
    assert shown_progress(metrics, printed, "n", T0) is metrics  # cockpit's metrics win, as on the charts
    assert shown_progress(syncs, None, "n", T0) is syncs


async def test_the_run_view_shows_a_plain_scripts_printed_steps(tmp_path):
    """The run view of a script that prints ``step N loss X`` while the watchdog counts its collectives: the
    table says the printed step, and the side panel the table's rate (one figure for one rank)."""
    runs = tmp_path / "runs"
    runs.mkdir(mode=0o700)
    run_id = "printed-20260924-000000-ab03"
    run_dir = create_run_dir(runs, run_id)
    for rank in (0, 1):
        (run_dir / "logs" / f"rank-{rank}.localhost.log").write_text(
            "".join(f"plain: rank {rank} step {s} loss {1 / s:.4f}\n" for s in range(5, 255, 5)))
    progress = {str(r): RankProgress("localhost", "running", step=0, step_source="syncs") for r in (0, 1)}
    write_status(run_dir, RunStatus(run_id=run_id, name="printed", launcher="local", job_file="/j.yaml",
                                    hosts=["localhost"], world_size=2, state="running", created=T0,
                                    started=T0 + 1, progress=progress))
    ctx = Context(runs_dir=runs, fleet=FixedFleet([], local_names=("localhost",)), base_dir=tmp_path,
                  config_path=tmp_path / "config" / "tui.yaml", partitions=lambda: [], runs_every=3600)
    app = CockpitApp(ctx)
    async with app.run_test(size=(120, 30)) as pilot:
        app.push_screen(RunViewScreen(run_dir))
        await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen.status is not None,
                    what="the run view")
        ranks = app.screen.query_one("#ranks")
        await until(pilot, lambda: ranks.row_count >= 3 and str(ranks.get_row_at(2)[1]) == "250",
                    what="rank 1's printed step")
        assert str(ranks.get_row_at(1)[1]) == "250"
        with open(run_dir / "logs" / "rank-0.localhost.log", "a") as f:
            f.write("plain: rank 0 step 255 loss 0.0039\n")
        await until(pilot, lambda: str(ranks.get_row_at(1)[1]) == "255", what="rank 0's next step", timeout=20)
