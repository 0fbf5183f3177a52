"""status.json's typed records: every status.json the untyped code wrote (tests/fixtures/runs, see its README)
reads and writes back byte for byte, and `cockpit ps --json` and `cockpit diagnose --json` over them print what
that code printed (the recorded hang, straggler and crash runs hold live findings, progress flags and history)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env

from cockpit.run.records import NodeRecord, RankExit, RecordError
from cockpit.run.store import load_status

FIXTURES = REPO / "tests" / "fixtures" / "runs"
DIAGNOSES = REPO / "tests" / "fixtures" / "runs-diagnose"  # `cockpit diagnose RUN --json` of each, and its exit code
STATUS_FILES = sorted(FIXTURES.rglob("status.json"))


def test_the_fixtures_hold_every_kind_of_node():
    kinds = set()
    for path in STATUS_FILES:
        for n in load_status(path.parent).nodes:
            kinds.add("trial" if n.trial else "slurm" if n.slurm else "ssh" if n.ssh else "process")
    assert kinds == {"trial", "slurm", "ssh", "process"} and len(STATUS_FILES) == 14


@pytest.mark.parametrize("path", STATUS_FILES, ids=lambda p: str(p.parent.relative_to(FIXTURES)))
def test_a_status_written_by_the_untyped_code_reads_and_writes_back_byte_for_byte(path: Path):
    assert load_status(path.parent).to_json() == path.read_text(encoding="utf-8")


def test_the_records_read_typed():
    ssh = load_status(next(FIXTURES.glob("ssh2-*")))
    ff = ssh.first_failure
    assert (ff.rank, ff.agent, ff.node_rank, ff.signal) == (None, True, 0, 9)
    assert ssh.ranks["0"].teardown_abort and ssh.ranks["0"].signal == 6
    lost = ssh.nodes[1]
    assert (lost.pid, lost.ssh.start, lost.ssh.shared, lost.state) == (None, None, False, "lost")
    sweep = load_status(next(FIXTURES.glob("demosweep-*")))
    assert [(n.trial.index, n.trial.args, n.trial.gpus, n.state) for n in sweep.nodes] == [
        (0, ("--fail-rank", "1"), (), "failed"), (1, ("--fail-rank", "5"), (), "succeeded")]
    trial = load_status(next(FIXTURES.glob("demosweep-*/trial-0")))
    assert trial.first_failure.description == "killed by SIGKILL (status 137)" and trial.nodes[0].exit_code is None


def test_null_and_absent_stay_apart():
    """A trial's own node has no exit_code key; a local node has "exit_code": null while it runs."""
    absent = {"host": "vm", "node_rank": 0, "pid": 7}
    null = {**absent, "exit_code": None}
    assert NodeRecord.from_dict(absent).to_dict() == absent and NodeRecord.from_dict(null).to_dict() == null
    assert NodeRecord.from_dict(absent).exit_code is None is NodeRecord.from_dict(null).exit_code


def test_a_record_of_the_wrong_shape_names_its_field():
    with pytest.raises(RecordError, match=r"nodes\[2\]: trial: expected a number, found \"x\""):
        NodeRecord.from_dict({"host": "h", "node_rank": 0, "trial": "x"}, "nodes[2]: ")
    with pytest.raises(RecordError, match="ranks.1: time: missing"):
        RankExit.from_dict({"rank": 1, "host": "h", "status": 0}, "ranks.1: ")


def test_ps_json_prints_what_the_untyped_code_printed(tmp_path: Path):
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURES, runs)
    env = cockpit_env(COCKPIT_RUNS_DIR=str(runs))
    r = subprocess.run([sys.executable, "-m", "cockpit", "ps", "--json"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    # The forecast (cockpit.insight.forecast) came later and reads the clock for live runs: each run has one, and the
    # rest is what the untyped code printed, byte for byte.
    out = json.loads(r.stdout)
    forecasts = [run.pop("forecast") for run in out["runs"]]
    assert all(set(f) >= {"fits", "why", "steps_done", "total_steps", "gpus", "gpu_hours"} for f in forecasts)
    text = json.dumps(out, indent=2) + "\n"
    assert text.replace(str(runs), "RUNS") == (FIXTURES / "ps.json").read_text(encoding="utf-8")
    for path in STATUS_FILES:  # and ps wrote nothing back
        assert (runs / path.relative_to(FIXTURES)).read_bytes() == path.read_bytes()


@pytest.mark.parametrize("run", sorted(p.parent.name for p in FIXTURES.glob("*/status.json")))
def test_diagnose_json_prints_what_the_untyped_code_printed(tmp_path: Path, run: str):
    """Byte for byte, with its exit code: the findings of the recorded hangs (culprits, victims, the collective,
    the stacks gathered), the straggler, the cleared stall of a run's history and a crash's first failure."""
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURES, runs)
    for path in runs.rglob("status.json"):  # the stacks a finding names are the copy's
        path.write_text(path.read_text(encoding="utf-8").replace("@RUNS@", str(runs)), encoding="utf-8")
    env = cockpit_env(COCKPIT_RUNS_DIR=str(runs), NO_COLOR="1")
    r = subprocess.run([sys.executable, "-m", "cockpit", "diagnose", run, "--json"], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=120)
    codes = json.loads((DIAGNOSES / "exit_codes.json").read_text(encoding="utf-8"))
    assert (r.returncode, r.stderr) == (codes[run], "")
    assert r.stdout.replace(str(runs), "RUNS") == (DIAGNOSES / f"{run}.json").read_text(encoding="utf-8")
