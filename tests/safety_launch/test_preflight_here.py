"""What validated and then failed at launch (issue 27, item 8): `cockpit validate` refuses a missing script
and a local job's *_SOCKET_IFNAME that this machine lacks, as the preflight of `cockpit run` does; a job with
`module:` goes through validate, doctor and run (the local preflight assumed `script:`: a TypeError). Real
`cockpit` processes; each test sets the environment it needs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

from cockpit.run.store import list_runs

CPU = "launcher: local\ngpus: none\nprocs_per_node: 1\n"


def cockpit(tmp_path: Path, *args: str, env: dict | None = None, timeout: float = 120):
    base = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(REPO), "NO_COLOR": "1",
            "COCKPIT_RUNS_DIR": str(tmp_path / "runs")}
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=tmp_path,
                          env={**base, **(env or {})}, timeout=timeout)


def job(tmp_path: Path, text: str, name: str = "job.yaml") -> str:
    (tmp_path / name).write_text(text)
    return name


def package(tmp_path: Path) -> Path:
    """pkg/train.py, whose package announces an import (validate and doctor must not import it)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("open(__file__ + '.imported', 'w').close()\n")
    (pkg / "train.py").write_text("import os\nprint('trained', os.environ['RANK'], flush=True)\n")
    return pkg


# -- the script ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("launcher", ["local", "slurm"])
def test_validate_refuses_a_missing_script_where_it_is_named(tmp_path, launcher):
    path = job(tmp_path, f"name: t\nlauncher: {launcher}\nscript: nope.py\n")
    r = cockpit(tmp_path, "validate", path)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr == (f"job.yaml:3:1: script: nope.py is missing in {tmp_path} (hint: fix script: (relative to "
                        "workdir:), or create the script)\n")
    (tmp_path / "nope.py").write_text("")
    assert cockpit(tmp_path, "validate", path).stdout == "job.yaml: ok\n"


def test_validate_leaves_an_ssh_jobs_files_to_its_nodes(tmp_path):
    """The code of an ssh job lives on its nodes; `cockpit doctor JOB` checks it there."""
    r = cockpit(tmp_path, "validate", job(tmp_path, "name: t\nlauncher: ssh\nnodes: [a, b]\nscript: nope.py\n"))
    assert r.returncode == 0 and r.stdout == "job.yaml: ok\n"


def test_validate_refuses_a_missing_workdir(tmp_path):
    r = cockpit(tmp_path, "validate", job(tmp_path, "name: t\nscript: t.py\nworkdir: gone\n"))
    assert r.returncode == 2 and r.stderr.startswith(f"job.yaml:3:1: workdir: {tmp_path / 'gone'} does not exist")


# -- module: ------------------------------------------------------------------------------------------------------
def test_a_module_job_validates_without_importing_its_package(tmp_path):
    pkg = package(tmp_path)
    r = cockpit(tmp_path, "validate", job(tmp_path, "name: m\nmodule: pkg.train\n" + CPU))
    assert r.returncode == 0 and r.stdout == "job.yaml: ok\n", r.stderr
    assert not (pkg / "__init__.py.imported").exists()


def test_a_module_its_python_cannot_find_is_refused_where_it_is_named(tmp_path):
    package(tmp_path)
    r = cockpit(tmp_path, "validate", job(tmp_path, "name: m\n" + CPU + "module: pkg.nope\n"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"job.yaml:5:1: module: pkg.nope is not found by {sys.executable} from {tmp_path} "
                               "(hint: fix module:")


@pytest.mark.parametrize("launcher", ["local", "slurm"])
def test_doctor_of_a_module_job_says_what_it_checked(tmp_path, launcher):
    pkg = package(tmp_path)
    text = f"name: m\nmodule: pkg.train\nlauncher: {launcher}\n" + ("gpus: none\n" if launcher == "local" else "")
    r = cockpit(tmp_path, "doctor", job(tmp_path, text))
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stdout.splitlines()
    if launcher == "local":
        assert r.returncode == 0 and f"ok    module: pkg.train found from {tmp_path}" in lines
    else:  # the nodes' python imports it: nothing to look at here
        assert "ok    module: pkg.train: not looked for here (the nodes' python imports it at the start)" in lines
    assert not (pkg / "__init__.py.imported").exists()


def test_a_module_job_runs(tmp_path):
    package(tmp_path)
    r = cockpit(tmp_path, "run", job(tmp_path, "name: m\nmodule: pkg.train\n" + CPU), timeout=180)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "trained 0" in r.stdout
    [(_, status)] = list_runs(tmp_path / "runs")
    assert status.state == "succeeded"


def test_run_refuses_a_module_its_python_cannot_find_before_a_run_directory(tmp_path):
    r = cockpit(tmp_path, "run", job(tmp_path, "name: m\nmodule: nosuchpkg.train\n" + CPU))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "FAIL  module: nosuchpkg.train is not found by" in r.stderr
    assert list_runs(tmp_path / "runs") == []


# -- interfaces ---------------------------------------------------------------------------------------------------
MISSING = "cockpit-noif0"


@pytest.mark.parametrize(("var", "value", "what"), [
    ("GLOO_SOCKET_IFNAME", MISSING, f"names {MISSING}, which"),
    ("GLOO_SOCKET_IFNAME", f"lo,{MISSING}", f"names {MISSING}, which"),
    ("NCCL_SOCKET_IFNAME", "cockpit-noif", "selects no interface:"),
    ("NCCL_SOCKET_IFNAME", f"={MISSING}", "selects no interface:"),
])
def test_validate_refuses_an_interface_this_machine_lacks(tmp_path, var, value, what):
    (tmp_path / "t.py").write_text("")
    r = cockpit(tmp_path, "validate", job(tmp_path, f"name: t\nscript: t.py\n{CPU}env:\n  {var}: '{value}'\n"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"job.yaml:7:3: env.{var}: {var}={value} {what} this machine does not have (it has ")
    assert "lo" in r.stderr.split("(it has ", 1)[1]


@pytest.mark.parametrize(("var", "value"), [("GLOO_SOCKET_IFNAME", "lo"), ("NCCL_SOCKET_IFNAME", "lo"),
                                            ("NCCL_SOCKET_IFNAME", "^docker,lo"), ("NCCL_SOCKET_IFNAME", "=lo")])
def test_interfaces_this_machine_has_are_fine(tmp_path, var, value):
    (tmp_path / "t.py").write_text("")
    r = cockpit(tmp_path, "validate", job(tmp_path, f"name: t\nscript: t.py\n{CPU}env:\n  {var}: '{value}'\n"))
    assert r.returncode == 0 and r.stdout == "job.yaml: ok\n", r.stderr


def test_the_shell_interface_is_the_runs_business_not_the_files(tmp_path):
    """The ranks of a local run inherit this shell's GLOO_SOCKET_IFNAME: run refuses it before a run directory,
    saying where it came from; validate judges the job file alone."""
    (tmp_path / "t.py").write_text("")
    path = job(tmp_path, "name: t\nscript: t.py\n" + CPU)
    shell = {"GLOO_SOCKET_IFNAME": MISSING}
    assert cockpit(tmp_path, "validate", path, env=shell).returncode == 0
    r = cockpit(tmp_path, "run", path, env=shell)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert (f"FAIL  interface: GLOO_SOCKET_IFNAME={MISSING} (from this shell's environment) names {MISSING}, "
            "which this machine does not have") in r.stderr
    assert list_runs(tmp_path / "runs") == []
