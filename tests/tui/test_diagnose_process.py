"""The run view diagnoses a run of many ranks in a process of its own (cockpit.tui.models.diagnose_process): the
report it hands back is the one the UI's thread makes, and the child is bounded in time."""

from __future__ import annotations

import subprocess

import pytest
from tui.tuidata import FAILED_LOGS, NOW, make_run

from cockpit.insight.diagnosis import diagnose_run
from cockpit.run.handle import Run
from cockpit.tui.models.diagnose_process import diagnose_apart, main


def test_the_childs_report_is_the_one_made_in_process(tmp_path):
    run_dir = make_run(tmp_path, "demo", "failed", NOW - 600, logs=FAILED_LOGS)
    report = diagnose_apart(run_dir)
    assert report.findings and report == diagnose_run(Run.load(run_dir))


def test_the_child_is_bounded_in_time_and_says_its_usage(tmp_path, capsys):
    run_dir = make_run(tmp_path, "demo", "failed", NOW - 600, logs=FAILED_LOGS)
    with pytest.raises(subprocess.TimeoutExpired):  # killed, not waited for past its time
        diagnose_apart(run_dir, timeout=0.01)
    assert main([]) == 2 and "usage: python -m cockpit.tui.models.diagnose_process RUN_DIR" in capsys.readouterr().err
