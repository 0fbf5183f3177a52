"""The local preflight (cockpit.preflight.local): `cockpit run` refuses what `cockpit doctor JOB` predicts,
with the same lines, before any rank starts; --no-preflight overrides. Real `cockpit` processes, the real
probe under the job's python; the pure checks on facts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env, wait_for

from cockpit import nvml
from cockpit.fleet.records import NodeReport
from cockpit.launch.local import facts as local_facts
from cockpit.preflight import checks as preflight
from cockpit.preflight.local import LocalFacts, local_checks
from cockpit.run.store import list_runs
from cockpit.spec.model import load_spec, parse_spec


def cockpit(runs: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = cockpit_env(COCKPIT_RUNS_DIR=str(runs), NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=timeout)


def fails(r: subprocess.CompletedProcess) -> list[str]:
    return [line.strip() for line in (r.stdout + r.stderr).splitlines() if line.strip().startswith("FAIL  ")]


def gpus_here() -> int:
    report = nvml.read()
    return len(report.gpus) if report.state == "ok" else 0


def test_run_of_a_missing_script_is_refused_with_the_doctors_line(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text((REPO / "jobs" / "demo.yaml").read_text().replace("script: demo.py", "script: nope.py"))
    doctor = cockpit(tmp_path / "runs", "doctor", str(job))
    run = cockpit(tmp_path / "runs", "run", str(job))
    assert doctor.returncode == 1 and run.returncode != 0 and "Traceback" not in run.stderr
    assert fails(run) == fails(doctor) == [f"FAIL  script: nope.py is missing in {tmp_path} (hint: fix script: "
                                          "(relative to workdir:), or create the script)"]
    assert "--no-preflight launches anyway" in run.stderr
    assert list_runs(tmp_path / "runs") == []  # refused before a run directory was made


@pytest.mark.skipif(gpus_here() >= 4, reason="this machine has the 4 GPUs jobs/local-gpus.yaml asks for")
def test_a_gpu_job_is_refused_on_a_machine_without_its_gpus_and_no_preflight_starts_it(tmp_path):
    runs = tmp_path / "runs"
    doctor = cockpit(runs, "doctor", "jobs/local-gpus.yaml")
    run = cockpit(runs, "run", "jobs/local-gpus.yaml")
    assert run.returncode != 0 and fails(run) == fails(doctor) and fails(run)[0].startswith("FAIL  GPUs")
    assert list_runs(runs) == []
    env = cockpit_env(COCKPIT_RUNS_DIR=str(runs), NO_COLOR="1")
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", "--no-preflight", "jobs/local-gpus.yaml"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: list_runs(runs), 60, "the run --no-preflight starts")
    finally:
        cockpit(runs, "stop", "last")
        proc.wait(60)


def test_the_demo_passes_its_preflight():
    spec = load_spec(REPO / "jobs" / "demo.yaml")
    facts = local_facts.probe(local_facts.files(spec, str(REPO / "jobs" / "demo.yaml")))
    checks = local_checks(spec, facts)
    assert preflight.failed(checks) == [] and {c.name for c in checks} >= {"script", "GPUs", "torch version"}


def test_a_python_that_does_not_exist_is_named(tmp_path):
    spec = parse_spec(f"name: t\nscript: t.py\npython: {tmp_path}/nopython\ngpus: none\n")
    (tmp_path / "t.py").write_text("")
    facts = local_facts.probe(local_facts.files(spec, str(tmp_path / "job.yaml")))
    [bad] = preflight.failed(local_checks(spec, facts))
    assert bad.name == "python" and f"{tmp_path}/nopython" in bad.detail and "python:" in bad.hint


def test_a_busy_fixed_port_and_a_missing_workdir():
    spec = parse_spec("name: t\nscript: t.py\ngpus: none\nmaster_port: 29511\n")
    node = NodeReport("localhost", "no_driver", versions=None, ports=(("29511", False),))
    facts = LocalFacts("/w", True, True, sys.executable, node, 29511)
    assert [c.name for c in preflight.failed(local_checks(spec, facts))] == ["master port"]
    gone = LocalFacts("/nowhere", False, False, sys.executable)
    [bad] = local_checks(spec, gone)
    assert bad.level == "FAIL" and bad.line().startswith("FAIL  workdir: /nowhere does not exist (hint: ")


def test_the_probe_runs_under_a_python_without_cockpit_installed(tmp_path):
    """The job's python need not have cockpit: the probe comes from this checkout's directory."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    spec = parse_spec(f"name: t\nscript: t.py\npython: {venv}/bin/python\ngpus: none\n")
    (tmp_path / "t.py").write_text("")
    facts = local_facts.probe(local_facts.files(spec, str(tmp_path / "job.yaml")))
    assert facts.node.reachable and facts.node.versions.python
    [bad] = preflight.failed(local_checks(spec, facts))
    assert bad.name == "torch"  # a bare venv has no torch: said before any rank starts
