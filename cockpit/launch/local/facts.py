"""What the local preflight (cockpit.preflight.local) looks at, gathered on this machine: the workdir and
script by a stat; a module: job's module as the job's python finds it, this machine's interface names and the
shell's *_SOCKET_IFNAME (``here``); then the node probe (cockpit.node.probe) run by the job's own python, so the
versions, GPUs and driver are the ones the ranks will see. The probe is stdlib + pynvml: it runs under any
python >= 3.10 with cockpit's directory on PYTHONPATH, whether or not cockpit is installed there."""

from __future__ import annotations

import json
import os
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
    from _socket import if_nameindex  # (socket.if_nameindex itself: socket.py's enums cost 10% of a validate)

    environ = os.environ if environ is None else environ
    try:
        names = tuple(name for _, name in if_nameindex())
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


# Which of the script's packages the job's python cannot find, as `python script.py` would look (the script's own
# directory first, then the job's environment): top-level names by importlib.util.find_spec, which imports nothing.
# The standard library counts as found. Prints the missing names as JSON.
FIND_IMPORTS = """import importlib.util, json, sys
sys.path[0] = sys.argv[1]
std = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
def found(name):
    try:
        return name in std or importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
print(json.dumps([n for n in sys.argv[2:] if not found(n)]))
"""


def imports(spec: JobSpec, facts: LocalFacts, environ=None, timeout: float = 30.0, run=None) -> LocalFacts:
    """``facts`` with the packages the script imports that the job's python cannot find (``missing``), asked in
    one process of that python with the job's env: over ``environ`` (default this process's). Unchanged where
    there is no scanned script or the python could not answer (the probe's check says why)."""
    scan = facts.script_scan
    if scan is None or facts.script_path is None or not scan.imports:
        return facts
    import subprocess

    run = run or subprocess.run
    environ = os.environ if environ is None else environ
    argv = [facts.python, "-c", FIND_IMPORTS, str(Path(facts.script_path).parent), *(i.name for i in scan.imports)]
    try:
        r = run(argv, capture_output=True, text=True, timeout=timeout, cwd=facts.workdir,
                env={**environ, **spec.env_dict}, stdin=subprocess.DEVNULL)
        missing = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 and r.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return facts
    if not isinstance(missing, list) or not all(isinstance(m, str) for m in missing):
        return facts
    return replace(facts, missing=tuple(missing))


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
        checks = preflight_local.local_checks(spec, imports(spec, probe(facts)))
    if preflight.failed(checks):
        raise PreflightFailed(job_path, checks)
    return checks
