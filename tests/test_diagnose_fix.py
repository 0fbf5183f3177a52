"""`cockpit diagnose RUN --fix / --apply` on a real failing run: the demo told to use a gloo interface with no
address fails at init (validate refuses a name this machine lacks, so the test makes a real one: a veth left
without an address, which gloo cannot use); the fix names one that works, as a diff of the job file (comments
kept), and --apply writes a new file next to it that validates, never over the original or an earlier fix."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env

from cockpit.node.ifaces import interfaces
from cockpit.run.store import list_runs
from cockpit.spec.model import load_spec

IFACE = f"cpfix{os.getpid() % 100000}"  # at most 15 characters: the kernel's limit on an interface name
JOB = """\
# the demo with a gloo interface that has no address
name: fixme
script: {script}   # the demo
args: [--epochs, "1", --steps-per-epoch, "5"]
launcher: local
env:
  GLOO_SOCKET_IFNAME: {iface}   # wrong on purpose
"""


def cockpit(runs: Path, *args: str) -> subprocess.CompletedProcess:
    env = cockpit_env(COCKPIT_RUNS_DIR=str(runs), NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=180)


@pytest.fixture(scope="module")
def veth():
    """A real interface of this machine with no address (CI runs as root), removed afterwards."""
    subprocess.run(["ip", "link", "add", IFACE, "type", "veth", "peer", "name", IFACE + "p"], check=True)
    try:
        yield IFACE
    finally:
        subprocess.run(["ip", "link", "del", IFACE], check=False)


@pytest.fixture(scope="module")
def failed(tmp_path_factory, veth):
    tmp = tmp_path_factory.mktemp("fix")
    job = tmp / "job.yaml"
    job.write_text(JOB.format(script=REPO / "jobs" / "demo.py", iface=veth))
    runs = tmp / "runs"
    assert cockpit(runs, "run", str(job), "-q").returncode != 0
    [(run_dir, _)] = list_runs(runs)
    return job, runs, run_dir


@pytest.mark.slow
def test_fix_proposes_an_interface_this_machine_has_as_a_diff(failed):
    job, runs, run_dir = failed
    before = job.read_text()
    out = cockpit(runs, "diagnose", run_dir.name, "--fix")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Gloo error" in out.stdout and "evidence: " in out.stdout and IFACE in out.stdout
    assert f"job file: {job} (the job file the run started from)" in out.stdout
    [added] = [line for line in out.stdout.splitlines() if line.startswith("+  GLOO_SOCKET_IFNAME")]
    name = added.split(":")[1].split("#")[0].strip()
    assert name in {i["name"] for i in interfaces() or ()} and name != IFACE
    assert f"-  GLOO_SOCKET_IFNAME: {IFACE}   # wrong on purpose" in out.stdout
    assert job.read_text() == before and not (job.parent / "job.fixed.yaml").exists()


@pytest.mark.slow
def test_apply_writes_a_new_valid_file_next_to_it_and_never_overwrites(failed):
    job, runs, run_dir = failed
    before = job.read_text()
    first = cockpit(runs, "diagnose", str(run_dir), "--fix", "--apply")
    assert first.returncode == 0, first.stdout + first.stderr
    fixed = job.parent / "job.fixed.yaml"
    assert f"cockpit run {fixed}" in first.stdout
    assert stat.S_IMODE(fixed.stat().st_mode) == 0o600
    spec = load_spec(fixed)
    assert dict(spec.env)["GLOO_SOCKET_IFNAME"] != IFACE
    assert "# wrong on purpose" in fixed.read_text() and fixed.read_text().startswith("# the demo")
    fixed_text = fixed.read_text()
    second = cockpit(runs, "diagnose", str(run_dir), "--apply")
    assert second.returncode == 0 and (job.parent / "job-fix-2.yaml").exists()
    assert fixed.read_text() == fixed_text and job.read_text() == before


@pytest.mark.slow
def test_the_runs_copy_is_used_when_the_original_is_gone(failed, tmp_path):
    _, runs, run_dir = failed
    status = json.loads((run_dir / "status.json").read_text())
    moved = tmp_path / "runs"
    shutil.copytree(run_dir, moved / run_dir.name)
    status["job_file"] = str(tmp_path / "gone.yaml")
    (moved / run_dir.name / "status.json").write_text(json.dumps(status))
    out = cockpit(moved, "diagnose", run_dir.name, "--fix")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "the run's copy (the job file it started from is gone)" in out.stdout


def test_a_run_without_fixable_findings_exits_1_and_bad_input_2(tmp_path):
    src = REPO / "tests/fixtures/runs/demofail-20261125-153419-399b"
    run_dir = tmp_path / "runs" / src.name
    shutil.copytree(src, run_dir)
    status = json.loads((run_dir / "status.json").read_text())
    (run_dir / "status.json").write_text(json.dumps({**status, "job_file": str(tmp_path / "gone.yaml")}))
    (run_dir / "job.yaml").write_text("name: demo\nscript: demo.py\n")
    out = cockpit(tmp_path / "runs", "diagnose", src.name, "--fix")
    assert out.returncode == 1 and "No finding has a configuration fix" in out.stdout
    assert not list(run_dir.glob("*.fixed.yaml"))
    (run_dir / "job.yaml").unlink()
    gone = cockpit(tmp_path / "runs", "diagnose", src.name, "--fix")
    assert gone.returncode == 2 and "no job file" in gone.stderr
    many = cockpit(tmp_path / "runs", "diagnose", src.name, src.name, "--fix")
    assert many.returncode == 2 and "take one run" in many.stderr
