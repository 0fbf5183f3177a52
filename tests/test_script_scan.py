"""What a job's script says before it runs (issue 33, items 3 and 4): a script that starts its own processes under
the default runner is warned at `cockpit validate` and `doctor` (set `runner: spawn`); a package it imports that
the job's python cannot find fails `doctor JOB` and `run`'s preflight at once, naming the module and the pip
install, instead of a ModuleNotFoundError on every rank. The scan is real `ast` over real sources; the commands
are real cockpit processes asking this machine's python."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env

from cockpit.preflight.script import scan

MISSING = "cockpit_test_no_such_pkg_33"


@pytest.mark.parametrize("source", [
    "import torch.multiprocessing as mp\nmp.spawn(f, nprocs=2)\n",
    "import torch\ntorch.multiprocessing.spawn(f, nprocs=2)\n",
    "from torch import multiprocessing as tmp\ndef main():\n    tmp.start_processes(f, nprocs=2)\n",
    "from torch.multiprocessing import spawn\nif __name__ == '__main__':\n    spawn(f, args=(), nprocs=2)\n",
    "from torch.multiprocessing import start_processes as go\ngo(f, nprocs=2, start_method='fork')\n",
])
def test_calls_that_start_processes_are_found(source):
    assert scan(source).spawns == source.count("\n", 0, source.index("(f")) + 1


@pytest.mark.parametrize("source", [
    "import multiprocessing as mp\nctx = mp.get_context('spawn')\nctx.Process(target=f).start()\n",
    "import torch.multiprocessing as mp\nmp.set_start_method('spawn')\n",
    "spawn = 'spawn'\nprint(spawn)\n",
    "import torch.distributed as dist\ndist.init_process_group('gloo')\n",
])
def test_other_uses_of_multiprocessing_are_not_spawns(source):
    assert scan(source).spawns is None


def test_imports_top_level_packages_once_with_where_they_are_needed():
    found = scan("import os, json.decoder\nimport torch.nn as nn\nfrom . import sibling\nfrom __future__ import x\n"
                 "try:\n    import wandb\nexcept ImportError:\n    wandb = None\n"
                 "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import mypy_only\n"
                 "def main():\n    import lightning\n    import torch\n"
                 "if __name__ == '__main__':\n    import accelerate\n")
    assert [(i.name, i.line, i.required) for i in found.imports] == [
        ("os", 1, True), ("json", 1, True), ("torch", 2, True), ("typing", 9, True), ("lightning", 13, False),
        ("accelerate", 16, True)]
    assert not found.edits_path and found.error is None


def test_a_script_that_edits_sys_path_is_said_so_and_a_broken_one_has_an_error():
    assert scan("import sys\nsys.path.insert(0, 'src')\nimport mine\n").edits_path
    assert scan("import sys, os\nsys.path += ['x']\n").edits_path
    assert scan("def broken(:\n").error.startswith("line 1: ")


def cockpit(*args: str, cwd: Path = REPO, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=cwd,
                          env=cockpit_env(NO_COLOR="1", **env), timeout=180)


def job(tmp_path: Path, script: str, extra: str = "") -> Path:
    (tmp_path / "train.py").write_text(script)
    path = tmp_path / "job.yaml"
    path.write_text(f"name: t\nscript: train.py\nlauncher: local\ngpus: none\n{extra}")
    return path


def test_doctor_fails_a_job_whose_script_imports_a_package_its_python_lacks(tmp_path):
    (tmp_path / "helper_mod.py").write_text("X = 1\n")  # the script's own directory: found, as `python train.py`
    path = job(tmp_path, f"import os\nimport torch\nimport helper_mod\nfrom sklearn_absent_33 import metrics\n"
                         f"import {MISSING}.sub\ndef main():\n    import {MISSING}_lazy\n")
    r = cockpit("doctor", str(path), "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    checks = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "imports"]
    [fail, warn] = checks
    assert fail["level"] == "FAIL" and "sklearn_absent_33 (line 4)" in fail["detail"]
    assert f"{MISSING} (line 5)" in fail["detail"] and "helper_mod" not in fail["detail"]
    assert "torch" not in fail["detail"].replace(sys.executable, "") and "os" not in fail["detail"].split()
    assert fail["hint"].startswith(f"{sys.executable} -m pip install sklearn_absent_33 {MISSING}")
    assert warn["level"] == "warn" and f"{MISSING}_lazy (line 7)" in warn["detail"]


def test_pip_names_differ_from_import_names_where_pip_says_so(tmp_path):
    path = job(tmp_path, "import cv2\n")
    r = cockpit("doctor", str(path))
    if "FAIL  imports:" not in r.stdout:
        pytest.skip("this python has OpenCV: nothing to install")
    assert "-m pip install opencv-python," in r.stdout and r.returncode == 1


def test_a_missing_package_imported_only_in_a_function_warns_and_doctor_passes(tmp_path):
    path = job(tmp_path, f"def main():\n    import {MISSING}\n")
    r = cockpit("doctor", str(path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"warn  imports: train.py imports {MISSING} (line 2)" in r.stdout


def test_every_package_found_is_an_ok_line(tmp_path):
    path = job(tmp_path, "import os\nimport torch\n")
    r = cockpit("doctor", str(path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok    imports: " in r.stdout and "finds every package train.py imports (2)" in r.stdout


def test_run_refuses_at_once_and_starts_nothing(tmp_path):
    path = job(tmp_path, f"import {MISSING}\nprint('never')\n")
    runs = tmp_path / "runs"
    r = cockpit("run", str(path), COCKPIT_RUNS_DIR=str(runs))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"FAIL  imports: train.py imports {MISSING} (line 1)" in r.stderr and "pip install" in r.stderr
    assert not runs.exists() or not any(runs.iterdir())


def test_the_job_env_pythonpath_is_where_the_ranks_look(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / f"{MISSING}.py").write_text("")
    path = job(tmp_path, f"import {MISSING}\n", f"env:\n  PYTHONPATH: {lib}\n")
    r = cockpit("doctor", str(path))
    assert r.returncode == 0 and "ok    imports: " in r.stdout, r.stdout + r.stderr


SPAWN_JOB = f"name: s\nscript: {REPO / 'jobs/own/spawn_ddp.py'}\nargs: ['2', '1']\n"


def test_validate_warns_a_spawning_script_under_the_default_runner(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(SPAWN_JOB)
    r = cockpit("validate", str(path))
    assert r.returncode == 0 and r.stdout == f"{path}: ok\n", r.stdout + r.stderr
    assert r.stderr.startswith(f"{path}:2:1: warning: script: {REPO / 'jobs/own/spawn_ddp.py'} calls "
                               "torch.multiprocessing.spawn (line "), r.stderr
    assert "(hint: this script starts its own processes: set `runner: spawn`" in r.stderr
    d = cockpit("doctor", str(path))
    assert d.returncode == 0 and "warn  runner: " in d.stdout, d.stdout + d.stderr


def test_validate_is_quiet_for_the_same_script_under_runner_spawn(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(SPAWN_JOB + "runner: spawn\nprocs_per_node: 2\n")
    r = cockpit("validate", str(path), "jobs/own/spawn.yaml")
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_a_refusal_still_wins_over_the_warning(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(SPAWN_JOB + "env:\n  GLOO_SOCKET_IFNAME: nosuchif0\n")
    r = cockpit("validate", str(path))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "env.GLOO_SOCKET_IFNAME: GLOO_SOCKET_IFNAME=nosuchif0" in r.stderr and "warning" not in r.stderr


def test_run_says_the_warning_before_the_ranks_start(tmp_path):
    """`cockpit run` of a spawning script under torchrun says validate's warning on stderr before its start line
    (the branch that spawns is not taken here: the ranks print and end, so the run is short and succeeds)."""
    path = job(tmp_path, "import sys\nif len(sys.argv) > 9:\n    import torch.multiprocessing as mp\n"
                         "    mp.spawn(print, nprocs=2)\nprint('no spawn today', flush=True)\n",
               "procs_per_node: 1\n")
    r = cockpit("run", str(path), "-q", COCKPIT_RUNS_DIR=str(tmp_path / "runs"))
    assert r.returncode == 0, r.stdout + r.stderr
    warning = "cockpit: warning: runner: train.py calls torch.multiprocessing.spawn (line 4)"
    assert warning in r.stderr and "set `runner: spawn`" in r.stderr, r.stderr
    runs = list((tmp_path / "runs").iterdir())
    recorded = json.loads((runs[0] / "preflight.json").read_text())["checks"]
    assert [(c["name"], c["level"]) for c in recorded] == [("runner", "warn")]
