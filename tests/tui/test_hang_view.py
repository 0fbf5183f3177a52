"""The run view over a real hung run (2 gloo ranks of a plain script, rank 1 stuck in load_batch): the rank
table flags the stall, the finding leads the list and opens its evidence (the culprit's stack), and `k`
shows every rank's stack in a scrollable view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tui.tuidata import until

from cockpit import launch
from cockpit.launch import procs
from cockpit.run.store import read_status
from cockpit.spec.model import load_spec
from cockpit.tui.app import CockpitApp
from cockpit.tui.models.context import Context
from cockpit.tui.models.fleet_feed import FixedFleet
from cockpit.tui.screens.evidence import EvidenceScreen
from cockpit.tui.screens.run_view import RunViewScreen
from cockpit.tui.screens.stacks import StacksScreen

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).resolve().parents[1] / "hang" / "scripts" / "plain_hang.py"


async def test_a_stalled_run_in_the_run_view(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    job = tmp_path / "stuck.yaml"
    job.write_text(f"name: stuck\nscript: {SCRIPT}\nargs: {json.dumps(['--stuck-rank', '1'])}\n"
                   "launcher: local\ngpus: none\nstall_after: 3\n")
    runs = tmp_path / "runs"
    run_dir = launch.prepare(load_spec(str(job)), str(job), runs)
    launch.start(run_dir, grace=2)
    ctx = Context(runs_dir=runs, fleet=FixedFleet([], local_names=("localhost",)), base_dir=tmp_path,
                  config_path=tmp_path / "config" / "tui.yaml", partitions=lambda: [], runs_every=3600)
    app = CockpitApp(ctx)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            app.push_screen(RunViewScreen(run_dir))
            await until(pilot, lambda: isinstance(app.screen, RunViewScreen), what="the run view")
            view = app.screen
            await until(pilot, lambda: view.status is not None and view.status.findings, timeout=90,
                        what="the stall finding")
            ranks = view.query_one("#ranks")
            await until(pilot, lambda: ranks.row_count >= 3, what="the rank rows")
            rows = {str(ranks.get_row_at(i)[0]): [str(c) for c in ranks.get_row_at(i)] for i in range(ranks.row_count)}
            host = read_status(run_dir).hosts[0]
            assert rows[f"{host}:1"][4] == "STUCK" and rows[f"{host}:0"][4] == "wait"  # culprit, victim
            assert rows[f"{host}:0"][1] == "3"  # three all_reduces done before rank 1 got stuck
            findings = view.query_one("#findings")
            first = str(findings.get_option_at_index(0).prompt)
            assert first.startswith("STALL") and "rank 1" in first and "load_batch (plain_hang.py:" in first
            findings.focus()
            findings.highlighted = 0
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, EvidenceScreen) and app.screen.items, timeout=60,
                        what="the evidence")  # read from the run's files in a worker: slow when the machine is busy
            [(_, line, path, context)] = app.screen.items
            assert path.endswith(".txt") and any("-- rank 1 (outside any collective" in t for _, t in context)
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is view, what="the run view again")
            await pilot.press("k")
            await until(pilot, lambda: isinstance(app.screen, StacksScreen), what="the stacks view")
            text = app.screen.query_one("#stacks-text")
            await until(pilot, lambda: "-- rank 1" in str(text.content), timeout=60, what="every rank's stack")
            assert "-- rank 0 (in all_reduce" in str(text.content) and "load_batch" in str(text.content)
            links = str(app.screen.query_one("#stacks-links").content)  # the node's link row beside the stacks
            assert links.startswith(f"link {host}: ") and "no connection is stuck or slow: no link finding" in links
    finally:
        status = read_status(run_dir)
        procs.kill_run(status.run_id, grace=2)
    assert procs.run_pids(status.run_id) == []
