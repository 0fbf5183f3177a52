"""Launching the demo from the TUI (real torchrun + gloo, 2 CPU ranks): the run appears, its ranks' lines
and metrics show in the run view, and stop ends it."""

from __future__ import annotations

import pytest
from helpers import REPO
from tui.tuidata import until

from cockpit.launch import procs
from cockpit.run.store import list_runs, read_status
from cockpit.tui.app import CockpitApp
from cockpit.tui.screens.compose import ComposeScreen
from cockpit.tui.screens.dialogs import ConfirmScreen
from cockpit.tui.screens.run_view import RunViewScreen
from cockpit.tui.widgets.rank_log import RankLog

pytestmark = pytest.mark.slow


async def test_launch_the_demo_follow_its_logs_and_stop_it(ctx, tmp_path):
    ctx.runs_dir = tmp_path / "runs"
    ctx.job = REPO / "jobs" / "demo.yaml"
    ctx.stop_grace = 5.0
    app = CockpitApp(ctx)
    told: list[str] = []  # every notification, as it is raised: the app shows one 3 s, then forgets it
    shown = app.notify
    app.notify = lambda message, **kw: told.append(str(message)) or shown(message, **kw)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("f3")
            await until(pilot, lambda: isinstance(app.screen, ComposeScreen) and app.screen.form.script == "demo.py")
            compose = app.screen
            compose.query_one("#f-args").value = "--epochs 1 --steps-per-epoch 3000"
            await until(pilot, lambda: compose.checked is not None and "3000" in compose.checked.text)
            compose.action_launch()  # ctrl+l, and an impatient second one before the first is done:
            compose.action_launch()  # it must not start a second run
            assert "a launch is already under way" in told, told
            # the screen is current once pushed; its widgets are mounted a moment later (on a loaded machine,
            # after this test's next look)
            await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen.query(RankLog),
                        timeout=30, what="the run view, mounted")
            view = app.screen
            [(run_dir, status)] = list_runs(ctx.runs_dir)
            assert view.run_dir == run_dir and status.launcher == "local" and status.world_size == 2
            log = view.query_one(RankLog)
            await until(pilot, lambda: any("[cockpit] step=" in line for line in log.lines), timeout=150,
                        what="rank 0's first progress line")
            lines = list(log.lines)
            host = status.hosts[0]
            assert any(line.startswith(f"[{host}:1] [cockpit] start rank=1 world=2") for line in lines)
            assert any(line.startswith(f"[{host}:agent] ") for line in lines)
            await until(pilot, lambda: "loss" in str(view.query_one("#loss-label").content), timeout=10,
                        what="the metrics plot")
            assert view.status.state == "running" and view.check_action("stop", ())
            await pilot.press("s")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the stop question")
            await pilot.press("y")
            await until(pilot, lambda: view.status.state == "stopped", timeout=60, what="the stopped state")
            final = read_status(run_dir)
            assert final.state == "stopped" and final.stop_requested
            assert procs.run_pids(final.run_id) == []
    finally:
        for _, s in list_runs(ctx.runs_dir):
            procs.kill_run(s.run_id, grace=1.0)
