"""What the local preflight (cockpit.preflight.local) looks at, gathered on this machine: the workdir and
script by a stat; a module: job's module as the job's python finds it, this machine's interface names and the
shell's *_SOCKET_IFNAME (``here``); then the node probe (cockpit.node.probe) run by the job's own python, so the
versions, GPUs and driver are the ones the ranks will see. The probe is stdlib + pynvml: it runs under any
python >= 3.10 with cockpit's directory on PYTHONPATH, whether or not cockpit is installed there."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import cockpit
from cockpit.launch.site import interpreter, job_files
from cockpit.preflight.local import HOST, IFNAME_VARS, LocalFacts

# subprocess and the node's records are imported where a process is started (a module: job, the probe):
# `cockpit validate` of a script: job starts none.
if TYPE_CHECKING:
    from cockpit.fleet.records import NodeReport
    from cockpit.spec.model import JobSpec


def files(spec: JobSpec, job_path: str) -> LocalFacts:
    """The facts the file checks need (no process started; a module: job's module is not looked for)."""
    return job_files(spec, job_path, interpreter(spec, sys.executable))


# Finds a module as `python -m` would from the working directory, without running any of its code: the top
# package by importlib, each submodule by the path finder alone (importing a parent would run its __init__).
FIND_MODULE = """import importlib.machinery, importlib.util, sys
top, *rest = sys.argv[1].split(".")
found = importlib.util.find_spec(top)
for part in rest:
    paths = found.submodule_search_locations if found else None
    found = importlib.machinery.PathFinder.find_spec(part, list(paths)) if paths else None
sys.exit(0 if found else 3)
"""


def here(spec: JobSpec, facts: LocalFacts, environ=None, inherit: bool = True, timeout: float = 30.0,
         run=None) -> LocalFacts:
    """``facts`` with what this machine says before a local run: the module of a module: job as the job's
    python finds it from the workdir (in ``environ``, default this process's), the network interface names,
    and (``inherit``) the *_SOCKET_IFNAME of ``environ``, which the ranks inherit."""
    environ = os.environ if environ is None else environ
    try:
        names = tuple(name for _, name in socket.if_nameindex())
    except OSError:
        names = None
    inherited = tuple((k, environ[k]) for k in IFNAME_VARS if k in environ) if inherit else ()
    facts = replace(facts, interfaces=names, inherited=inherited)
    if spec.module is None or not facts.workdir_exists:
        return facts
    import subprocess

    run = run or subprocess.run
    try:
        r = run([facts.python, "-c", FIND_MODULE, spec.module], capture_output=True, text=True, timeout=timeout,
                cwd=facts.workdir, env=dict(environ), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return replace(facts, module_error=str(exc))
    if r.returncode not in (0, 3):
        return replace(facts, module_error=(r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1])
    return replace(facts, module_found=r.returncode == 0)


def probe(facts: LocalFacts, timeout: float = 30.0, run=None) -> LocalFacts:
    """``facts`` with this machine's report as the job's python gives it. ``run``: subprocess.run's shape
    (default: subprocess.run)."""
    import subprocess

    from cockpit.fleet.records import NodeReport

    run = run or subprocess.run
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
    from cockpit.fleet.records import NodeReport

    return NodeReport(HOST, "error", why, "set python: in the job to an interpreter (python >= 3.10, with torch)")


def check(spec: JobSpec, job_path: str) -> list:
    """The local preflight (cockpit.preflight.local): the files first, at once, then this machine through the
    job's python; raises PreflightFailed with doctor's lines. Returns the checks."""
    from cockpit.launch.site import PreflightFailed
    from cockpit.preflight import checks as preflight
    from cockpit.preflight import local as preflight_local

    facts = here(spec, files(spec, job_path))
    checks = preflight_local.file_checks(spec, facts) + preflight_local.interface_checks(spec, facts)
    if not preflight.failed(checks):
        checks = preflight_local.local_checks(spec, probe(facts))
    if preflight.failed(checks):
        raise PreflightFailed(job_path, checks)
    return checks
