"""SVG snapshots of every screen at 80×24 and 160×48 (pytest-textual-snapshot), from fixed data: the recorded
NVML fixtures for the fleet, finished run directories with real logs, a fixed clock and fixed dry-run facts.

Update after an intended change with `pytest tests/tui/test_snapshots.py --snapshot-update`, then look at
the SVGs (tests/tui/__snapshots__/) before committing them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import REPO
from tui.tuidata import fleet_shown, until

from cockpit.tui.app import CockpitApp
from cockpit.tui.screens.compose import ComposeScreen
from cockpit.tui.screens.help import HelpScreen
from cockpit.tui.screens.run_view import RunViewScreen
from cockpit.tui.screens.runs import RunsScreen

SIZES = [(80, 24), (160, 48)]
ids = [f"{w}x{h}" for w, h in SIZES]


async def settle(pilot) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def show_fleet(pilot) -> None:
    app = pilot.app
    await until(pilot, lambda: fleet_shown(app), what="the fleet history")
    await pilot.press("down", "down", "space", "down", "down", "down", "space", "up", "up", "up")  # the chart: H100
    await settle(pilot)


async def show_compose(pilot) -> None:
    app = pilot.app
    await pilot.press("f3")
    await until(pilot, lambda: isinstance(app.screen, ComposeScreen) and app.screen.form.script == "demo.py"
                and "torchrun" in app.screen.query_one("#preview").text, what="the demo in compose")
    app.screen.set_focus(None)  # no blinking cursor in a snapshot
    await settle(pilot)


async def show_runs(pilot) -> None:
    await pilot.press("f4")
    await until(pilot, lambda: isinstance(pilot.app.screen, RunsScreen) and pilot.app.screen.runs)
    await settle(pilot)


async def show_run_view(pilot) -> None:
    await show_runs(pilot)
    await pilot.press("enter")
    app = pilot.app
    await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen.report is not None
                and "loss" in str(app.screen.query_one("#loss-label").content)
                and str(app.screen.query_one("#run-forecast").content), what="the run view")
    await settle(pilot)


async def show_help_screen(pilot) -> None:
    await show_run_view(pilot)
    await pilot.press("question_mark")
    await until(pilot, lambda: isinstance(pilot.app.screen, HelpScreen))
    await settle(pilot)


SCREENS = {"fleet": show_fleet, "compose": show_compose, "runs": show_runs, "run_view": show_run_view,
           "help": show_help_screen}


def demo_here() -> Path:
    """jobs/demo.yaml with its script beside it (Compose checks that the script is there), shown relative to
    the working directory."""
    Path("jobs").mkdir()
    for name in ("demo.yaml", "demo.py"):
        shutil.copy(REPO / "jobs" / name, f"jobs/{name}")
    return Path("jobs/demo.yaml")


@pytest.mark.parametrize("size", SIZES, ids=ids)
@pytest.mark.parametrize("screen", list(SCREENS))
def test_screen(snap_compare, ctx, runs, screen, size):
    ctx.job = demo_here()
    assert snap_compare(CockpitApp(ctx), terminal_size=size, run_before=SCREENS[screen])


@pytest.mark.parametrize("screen", ["runs", "run_view"])
def test_screen_at_120x36(snap_compare, ctx, runs, screen):
    """The size between the two above (issue 33 item 7c): the run view's footer has every key, the runs table
    every column."""
    ctx.job = demo_here()
    assert snap_compare(CockpitApp(ctx), terminal_size=(120, 36), run_before=SCREENS[screen])
