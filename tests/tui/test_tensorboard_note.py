"""The TUI's charts of a run whose only metrics are TensorBoard event files, in a cockpit whose Python cannot
import tensorboard: the empty chart's note says where the files are and the pip command (cockpit.plot.
tensorboard_files), as `cockpit plot` does (tests/plot/test_own_metrics.py). The package is made unimportable
as Python does for one that is not installed: None in sys.modules, for it and any of its modules loaded."""

from __future__ import annotations

import sys
import time

from torch.utils.tensorboard import SummaryWriter
from tui.test_charts import open_charts
from tui.tuidata import until

from cockpit.run.status import RunStatus
from cockpit.run.store import create_run_dir, write_status
from cockpit.tui.app import CockpitApp


async def test_event_files_without_the_package_are_said_on_the_empty_chart(ctx, monkeypatch):
    work = ctx.runs_dir.parent / "work"
    writer = SummaryWriter(str(work / "runs" / "Nov28_host"))
    writer.add_scalar("loss", 1.0, 1)
    writer.close()
    run_dir = create_run_dir(ctx.runs_dir, "tb-20261128-000000-ab02")
    job = f"name: tb\nscript: train.py\nlauncher: local\ngpus: none\nworkdir: {work.resolve()}\n"
    (run_dir / "job.yaml").write_text(job)
    (run_dir / "logs" / "rank-0.node0.log").write_text("training\n")
    write_status(run_dir, RunStatus(run_id=run_dir.name, name="tb", launcher="local", job_file="/j/tb.yaml",
                                    hosts=["node0"], world_size=1, state="running", created=time.time() - 60,
                                    started=time.time() - 60))
    for name in [n for n in sys.modules if n.split(".")[0] == "tensorboard"] + ["tensorboard"]:
        monkeypatch.setitem(sys.modules, name, None)
    async with CockpitApp(ctx).run_test(size=(100, 30)) as pilot:
        screen = await open_charts(pilot, run_dir)
        note = screen.query_one("#charts-note")
        await until(pilot, lambda: "pip install tensorboard" in str(note.content), what="the package's hint")
        assert "TensorBoard event files, not read: the tensorboard package is not installed" in str(note.content)
        assert f"{work.resolve() / 'runs' / 'Nov28_host'}:" in str(note.content)
