"""Fixtures for the TUI tests (data in tuidata.py): a context with fixed values (clock, facts, runs directory,
config) so that what is on screen is the same on every machine, and finished run directories."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import pytest
from tui.tuidata import FAILED_LOGS, NOW, OK_LOGS, fixed_facts, fleet_history, make_run

from cockpit.tui.models.context import Context
from cockpit.tui.models.fleet_feed import FixedFleet


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run `async def` tests on a fresh event loop (App.run_test needs one); no asyncio plugin needed."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(pyfuncitem.obj(**args))
    return True


@pytest.fixture
def ctx(tmp_path, monkeypatch) -> Context:
    """A context with fixed data; cwd is tmp_path so relative paths shown on screen are the same everywhere."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return Context(runs_dir=Path("runs"), fleet=FixedFleet(fleet_history(), local_names=("localhost",)),
                   base_dir=Path("/work/jobs"), config_path=tmp_path / "config" / "tui.yaml",
                   clock=lambda: NOW, facts=fixed_facts, partitions=lambda: [], runs_every=3600,
                   parse_budget=float("inf"), scan_slice=float("inf"))  # scan every line: no timing on screen


@pytest.fixture
def runs(ctx) -> list[Path]:
    """Three finished runs in the context's runs directory."""
    return [make_run(ctx.runs_dir, "demo", "succeeded", NOW - 7200, logs=OK_LOGS),
            make_run(ctx.runs_dir, "demo", "failed", NOW - 600, logs=FAILED_LOGS),
            make_run(ctx.runs_dir, "sweep", "stopped", NOW - 90000, ranks=8, host="gpu-h100")]
