"""The TUI's charts of a run whose script wrote no metrics file of cockpit's but printed its progress
(``step N loss=X``, cockpit.plot.sources): its loss and its steps/s are drawn per rank, as from cockpit.train's
metrics, where without them the charts open on the hook's collectives/s (tests/tui/test_charts.py)."""

from __future__ import annotations

import shutil

from tui.chartdata import HOSTS, RANKS, make_charts_run
from tui.test_charts import drawn, legend, open_charts, show
from tui.tuidata import until

from cockpit.tui.app import CockpitApp


async def test_printed_progress_lines_are_drawn_as_loss_and_steps_per_second(ctx):
    run_dir = make_charts_run(ctx.runs_dir)
    shutil.rmtree(run_dir / "metrics")  # a script of the user's own: no metrics file
    for rank in range(RANKS):
        with open(run_dir / "logs" / f"rank-{rank}.{HOSTS[rank]}.log", "a") as f:
            f.writelines(f"step {s} loss={4.0 / s + 0.1 * rank:.4f} lr=0.001\n" for s in range(1, 21))
    async with CockpitApp(ctx).run_test(size=(100, 30)) as pilot:
        screen = await open_charts(pilot, run_dir)
        await until(pilot, lambda: screen.shown[0] == "loss", what="the loss chart")
        [chart] = drawn(screen)
        assert legend(screen) == [f"rank {r}" for r in range(RANKS)]
        assert [round(y, 4) for y in chart.lines[1].ys][:2] == [4.1, 2.1] and chart.lines[1].xs[-1] == 20
        screen = await show(pilot, "rate")
        assert drawn(screen)[0].ylabel == "steps/s"
