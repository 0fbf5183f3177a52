"""The run view's timeline of attempts over a real healed local run: a plain script (no torch) whose first
attempt raises (on every rank) and whose relaunch (recover: attempts: 1) succeeds; the panel shows both attempts,
how the first ended and where, and stays hidden for a run of one attempt."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env
from tui.tuidata import until

from cockpit.run.store import list_runs
from cockpit.tui.app import CockpitApp
from cockpit.tui.models.context import Context
from cockpit.tui.models.fleet_feed import FixedFleet
from cockpit.tui.screens.run_view import RunViewScreen

pytestmark = pytest.mark.slow
SCRIPT = "import os\nif os.environ['COCKPIT_ATTEMPT'] == '0':\n    raise RuntimeError('first attempt fails')\n" \
         "print('second attempt done', flush=True)\n"


def healed_run(tmp_path: Path, attempts: int) -> Path:
    (tmp_path / "once.py").write_text(SCRIPT)
    job = tmp_path / "once.yaml"
    job.write_text(f"name: once\nscript: {tmp_path / 'once.py'}\nlauncher: local\ngpus: none\n"
                   f"recover:\n  attempts: {attempts}\n")
    runs = tmp_path / "runs"
    r = subprocess.run([sys.executable, "-m", "cockpit", "run", str(job), "-q"], capture_output=True, text=True,
                       cwd=REPO, timeout=300, env=cockpit_env(COCKPIT_RUNS_DIR=str(runs), NO_COLOR="1"))
    [(run_dir, status)] = list_runs(runs)
    assert r.returncode == (0 if attempts else 1), r.stdout + r.stderr
    return run_dir


async def open_view(tmp_path: Path, run_dir: Path, check) -> None:
    ctx = Context(runs_dir=run_dir.parent, fleet=FixedFleet([], local_names=("localhost",)), base_dir=tmp_path,
                  config_path=tmp_path / "config" / "tui.yaml", partitions=lambda: [], runs_every=3600)
    app = CockpitApp(ctx)
    async with app.run_test(size=(100, 30)) as pilot:
        app.push_screen(RunViewScreen(run_dir))
        await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen.status is not None,
                    timeout=30, what="the run view with its status")
        await check(pilot, app.screen.query_one("#run-attempts"))


async def test_a_healed_run_shows_its_attempts(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    run_dir = healed_run(tmp_path, 1)

    async def check(pilot, panel) -> None:
        # shown, and laid out: the class and the text come first, the new height with the next layout (a
        # loaded machine read a height of 0 between the two)
        await until(pilot, lambda: panel.has_class("-shown") and panel.region.height > 0, what="the attempts panel")
        lines = str(panel.content).split("\n")
        assert lines[0].startswith("attempts 2") and lines[0].endswith("✓") and "x" in lines[0], lines
        assert lines[1].startswith("#0 +0 s, ") and "failure rank " in lines[1] and "RuntimeError" in lines[1]
        assert lines[2].startswith("#1 +") and ", succeeded" in lines[2], lines
        assert panel.region.height == 3 and panel.display

    await open_view(tmp_path, run_dir, check)


async def test_a_run_of_one_attempt_has_no_panel(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (tmp_path / "ok.py").write_text("print('ok')\n")
    job = tmp_path / "ok.yaml"
    job.write_text(f"name: ok\nscript: {tmp_path / 'ok.py'}\nlauncher: local\ngpus: none\n")
    runs = tmp_path / "runs"
    subprocess.run([sys.executable, "-m", "cockpit", "run", str(job), "-q"], capture_output=True, text=True, cwd=REPO,
                   timeout=300, env=cockpit_env(COCKPIT_RUNS_DIR=str(runs)), check=True)
    [(run_dir, _)] = list_runs(runs)

    async def check(pilot, panel) -> None:
        await pilot.pause(0.2)
        assert not panel.has_class("-shown") and panel.region.height == 0 and str(panel.content) == ""

    await open_view(tmp_path, run_dir, check)
