"""What the local preflight (cockpit.preflight.local) looks at, gathered on this machine: the workdir and
script by a stat, then the node probe (cockpit.node.probe) run by the job's own python, so the versions, GPUs
and driver are the ones the ranks will see. The probe is stdlib + pynvml: it runs under any python >= 3.10
with cockpit's directory on PYTHONPATH, whether or not cockpit is installed there."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import cockpit
from cockpit.fleet.report import NodeReport
from cockpit.launch.plan import interpreter
from cockpit.paths import job_workdir
from cockpit.preflight.local import HOST, LocalFacts
from cockpit.spec.model import JobSpec


def files(spec: JobSpec, job_path: str) -> LocalFacts:
    """The facts the file checks need (no process started)."""
    workdir = job_workdir(job_path, spec.workdir)
    script = Path(workdir) / os.path.expanduser(spec.script)
    return LocalFacts(workdir, Path(workdir).is_dir(), script.is_file(), interpreter(spec),
                      port=spec.master_port)


def probe(facts: LocalFacts, timeout: float = 30.0, run=subprocess.run) -> LocalFacts:
    """``facts`` with this machine's report as the job's python gives it. ``run``: subprocess.run's shape."""
    argv = [facts.python, "-m", "cockpit.node.probe"] + (["--port", str(facts.port)] if facts.port else [])
    here = str(Path(cockpit.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
    try:
        r = run(argv, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return replace(facts, node=_failed(str(exc)))
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        return replace(facts, node=_failed((r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]))
    try:
        report = json.loads(lines[-1])
    except ValueError:
        return replace(facts, node=_failed(f"unreadable probe output: {lines[-1][:200]!r}"))
    node = NodeReport.from_probe(HOST, report.get("state") or "error", report.get("reason"), None, time.time(),
                                 report)
    return replace(facts, node=node)


def _failed(why: str) -> NodeReport:
    return NodeReport(HOST, "error", why, "set python: in the job to an interpreter (python >= 3.10, with torch)")


def check(spec: JobSpec, job_path: str) -> list:
    """The local preflight (cockpit.preflight.local): the files first, at once, then this machine through the
    job's python; raises PreflightFailed with doctor's lines. Returns the checks."""
    from cockpit.launch.plan import PreflightFailed
    from cockpit.preflight import checks as preflight
    from cockpit.preflight import local as preflight_local

    facts = files(spec, job_path)
    checks = preflight_local.file_checks(spec, facts)
    if not preflight.failed(checks):
        checks = preflight_local.local_checks(spec, probe(facts))
    if preflight.failed(checks):
        raise PreflightFailed(job_path, checks)
    return checks
