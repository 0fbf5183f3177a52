"""What Compose launches is the form as edited, not the file it was opened from: the run's job.yaml holds the
edited args, the ranks were started with them, and the file on disk is left as it was. A real local run
(torchrun, one rank of a stdlib script)."""

from __future__ import annotations

import pytest
from tui.tuidata import until

from cockpit.launch import procs
from cockpit.run.store import list_runs, rank_files, read_status
from cockpit.spec.model import load_spec
from cockpit.tui.app import CockpitApp
from cockpit.tui.screens.compose import ComposeScreen
from cockpit.tui.screens.run_view import RunViewScreen

pytestmark = pytest.mark.slow

SCRIPT = "import sys\nprint('argv=' + ' '.join(sys.argv[1:]), flush=True)\n"
JOB = "name: said\nscript: say.py\nargs: [--word, old]\nlauncher: local\ngpus: none\nprocs_per_node: 1\n"


async def test_the_edited_form_is_what_runs(ctx, tmp_path):
    (tmp_path / "say.py").write_text(SCRIPT)
    job = tmp_path / "said.yaml"
    job.write_text(JOB)
    ctx.job, ctx.runs_dir, ctx.stop_grace = job, tmp_path / "runs", 5.0
    app = CockpitApp(ctx)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("f3")
            await until(pilot, lambda: isinstance(app.screen, ComposeScreen) and app.screen.form.script == "say.py",
                        what="the job in Compose")
            compose = app.screen
            compose.query_one("#f-args").value = "--word new --count 2"
            await until(pilot, lambda: compose.checked is not None and compose.checked.spec is not None
                        and compose.checked.spec.args == ("--word", "new", "--count", "2"), what="the edited args")
            compose.action_launch()
            await until(pilot, lambda: isinstance(app.screen, RunViewScreen), timeout=60, what="the run view")
            [(run_dir, _)] = list_runs(ctx.runs_dir)
            assert load_spec(run_dir / "job.yaml").args == ("--word", "new", "--count", "2")
            await until(pilot, lambda: read_status(run_dir).final, timeout=120, what="the run to end")
        status = read_status(run_dir)
        assert status.state == "succeeded", status.note
        [(_, log)] = rank_files(run_dir, "log").values()
        assert "argv=--word new --count 2" in log.read_text()
        assert job.read_text() == JOB  # the opened file is not rewritten by a launch
    finally:
        for _, s in list_runs(ctx.runs_dir):
            procs.kill_run(s.run_id, grace=1.0)
