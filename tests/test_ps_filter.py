"""`cockpit ps` filters as squeue / docker users type them: --state (-t) running,failed, --name GLOB, --since
2h / a date, --last N (-n), alone, together and with --json; bad values refused in one line, exit 2. Real `cockpit`
processes over a runs directory made here (no run is started); the finished runs are listed from their summaries
on the second listing, which the filters must read the same."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import datetime

import pytest
from helpers import REPO, cockpit_env

from cockpit.cli.ps_options import since, states
from cockpit.run.store import RunStatus, create_run_dir, write_status

RUNS = [  # run id, job name, state, age in hours
    ("demo-1", "demo", "succeeded", 50),
    ("demo-2", "demo", "failed", 30),
    ("bert-3", "bert", "failed", 5),
    ("bert-4", "bert", "stopped", 1.5),
    ("demo-5", "demo", "succeeded", 0.5),
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    # ages from now, when the runs are made: not from when the module was imported (the suite's workers collect
    # every test first; a 40-minute suite aged bert-4 from 1.5 h to over 2 h before --since 2h was asked)
    now = time.time()
    runs_dir = tmp_path_factory.mktemp("ps") / "runs"
    for run_id, name, state, hours in RUNS:
        run_dir = create_run_dir(runs_dir, run_id)
        created = now - hours * 3600
        write_status(run_dir, RunStatus(run_id=run_id, name=name, launcher="local", job_file="/dev/null",
                                        hosts=["n0"], world_size=1, state=state, created=created, started=created,
                                        ended=created + 60, exit_code=0 if state == "succeeded" else 1))
    return runs_dir


def ps(runs_dir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", "ps", "--runs-dir", str(runs_dir), *args],
                          capture_output=True, text=True, cwd=REPO, timeout=60, env=cockpit_env(NO_COLOR="1"))


def listed(runs_dir, *args: str) -> list[str]:
    r = ps(runs_dir, *args)
    assert r.returncode == 0, r.stderr
    return [line.split()[0] for line in r.stdout.splitlines()[1:] if line and not line.startswith(" ")]


@pytest.mark.parametrize(("args", "want"), [
    ((), ["demo-1", "demo-2", "bert-3", "bert-4", "demo-5"]),
    (("--state", "failed"), ["demo-2", "bert-3"]),
    (("-t", "FAILED,stopped"), ["demo-2", "bert-3", "bert-4"]),
    (("--state", "failed", "--state", "succeeded"), ["demo-1", "demo-2", "bert-3", "demo-5"]),
    (("--state", "ended"), ["demo-1", "demo-2", "bert-3", "bert-4", "demo-5"]),
    (("--state", "active"), []),
    (("--name", "bert"), ["bert-3", "bert-4"]),
    (("--name", "de*"), ["demo-1", "demo-2", "demo-5"]),
    (("--name", "*-4,demo-1"), ["demo-1", "bert-4"]),
    (("--since", "2h"), ["bert-4", "demo-5"]),
    (("--since=-6h",), ["bert-3", "bert-4", "demo-5"]),
    (("--last", "2"), ["bert-4", "demo-5"]),
    (("-n", "1", "--state", "failed"), ["bert-3"]),
    (("--name", "demo", "--since", "40h", "--state", "failed,succeeded"), ["demo-2", "demo-5"]),
])
def test_filters_keep_what_they_name(runs, args, want):
    for _ in range(2):  # the first listing writes the summaries; the second lists from them
        assert listed(runs, *args) == want


def test_filters_with_json(runs):
    r = ps(runs, "--json", "--state", "failed", "--last", "1")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["runs"]
    assert [(run["run_id"], run["state"]) for run in got] == [("bert-3", "failed")]
    r = ps(runs, "--json", "--since", "1h")
    assert [run["run_id"] for run in json.loads(r.stdout)["runs"]] == ["demo-5"]


def test_nothing_matches_says_so_on_stderr(runs):
    r = ps(runs, "--state", "running")
    assert (r.returncode, r.stdout) == (0, "")
    assert "match --state running" in r.stderr


@pytest.mark.parametrize(("args", "said"), [
    (("--state", "runing"), "did you mean 'running'"),
    (("--state", "bogus"), "running, succeeded"),
    (("--since", "last tuesday"), "2h"),
    (("--last", "0"), "at least 1"),
    (("-n", "x"), "whole number"),
    (("--all", "--state", "failed"), "squeue"),
])
def test_bad_filters_are_refused_with_a_hint(runs, args, said):
    r = ps(runs, *args)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert said in r.stderr


def test_since_reads_ages_days_and_dates():
    now = datetime(2026, 11, 27, 15, 30).timestamp()
    assert since("90s", now) == now - 90
    assert since("2h", now) == since("2h ago", now) == since("-2h", now) == now - 7200
    assert since("1w", now) == now - 7 * 86400
    assert since("today", now) == datetime(2026, 11, 27).timestamp()
    assert since("yesterday", now) == datetime(2026, 11, 26).timestamp()
    assert since("2026-11-27T10:00", now) == datetime(2026, 11, 27, 10).timestamp()
    with pytest.raises(argparse.ArgumentTypeError):
        since("soon", now)


def test_states_take_groups_and_other_tools_words():
    assert states("Running, FAILED") == {"running", "failed"}
    assert states("active") == {"starting", "running"}
    assert states("completed,cancelled,pending") == {"succeeded", "stopped", "starting"}
    with pytest.raises(argparse.ArgumentTypeError, match="did you mean 'failed'"):
        states("faild")
