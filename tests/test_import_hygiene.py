"""Commands that do not need torch, textual, asyncssh or pynvml must not load them: each adds tens to
hundreds of milliseconds on a login node, and torch may not be installed there at all. A fresh subprocess
per command, because imports deferred into functions are invisible to a static import graph."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import REPO

HEAVY = ("torch", "textual", "asyncssh", "pynvml")
PROBE = """
import json, sys
from cockpit.cli.main import main
try:
    main({argv!r})
except SystemExit:
    pass
sys.stdout.flush()
print("\\nLOADED=" + json.dumps([m for m in {heavy!r} if m in sys.modules]), file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [["--help"], ["validate", "jobs/demo.yaml"], ["render", "jobs/demo.yaml"],
                                  ["render", "jobs/slurm.yaml"], ["validate", "jobs/nope.yaml"],
                                  ["gpus", "--help"], ["doctor", "--help"], ["diagnose", "--help"],
                                  ["ps", "--help"]])
def test_light_commands_load_no_heavy_module(argv):
    code = PROBE.format(argv=argv, heavy=HEAVY)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    loaded = json.loads(r.stderr.rsplit("LOADED=", 1)[1])
    assert loaded == [], f"cockpit {' '.join(argv)} loaded {loaded}"


def test_only_train_imports_torch_and_only_tui_imports_textual():
    """Static check of the layering rule in DESIGN.md: the top-level import lines of each module."""
    # node/nodecheck.py runs on Slurm nodes with the job's python (never in cockpit's process) and imports torch
    # inside its all-reduce: checking that torch works there is its job.
    owners = {"torch": ("train", "node/nodecheck.py"), "textual": "tui", "asyncssh": "remote/ssh.py",
              "pynvml": "nvml.py", "hyperscan": "logs/parse/scan.py",
              "plotext": ("plot/text.py", "tui"), "textual_plotext": "tui", "matplotlib": "plot/png.py",
              "tensorboard": "plot/tensorboard_files.py"}
    offenders = []
    for path in (REPO / "cockpit").rglob("*.py"):
        rel = path.relative_to(REPO / "cockpit").as_posix()
        for line in path.read_text().splitlines():
            words = line.strip().split()
            if len(words) >= 2 and words[0] in ("import", "from"):
                top = words[1].split(".")[0]
                # tui/models/ is the TUI's half without textual (tests/tui/test_models.py imports each)
                pure_tui = rel.startswith("tui/models/") and top in ("textual", "textual_plotext")
                if top in owners and (not rel.startswith(owners[top]) or pure_tui):
                    offenders.append(f"{rel}: {line.strip()}")
    assert offenders == []


# What `cockpit --help` and `cockpit ps` over finished runs must not import: asyncio (16 ms), the job parser (yaml),
# the launchers and the renderers (45 ms; issue 29: a start at the Python floor). Each is needed only by a command
# that launches, follows or parses a job, or for a run still going. Nor the forecast's inputs (a finished run's
# forecast is stored: only a run without one reads metrics) or datetime (only a --since filter's message uses it).
LISTING_NEEDS_NONE_OF = ("asyncio", "textual", "yaml", "cockpit.launch", "cockpit.render", "cockpit.spec",
                         "cockpit.cli.runs", "cockpit.cli.follow", "cockpit.insight.forecast_inputs", "datetime")


@pytest.mark.parametrize("argv", [["--help"], ["ps"], ["ps", "--json"]])
def test_help_and_ps_of_finished_runs_load_no_launcher_parser_or_asyncio(argv, tmp_path):
    from cockpit.run.store import RunStatus, create_run_dir, write_status

    runs = tmp_path / "runs"
    for i in range(3):
        run_dir = create_run_dir(runs, f"demo-{i}")
        (run_dir / "job.yaml").write_text((REPO / "jobs" / "demo.yaml").read_text())
        write_status(run_dir, RunStatus(run_id=f"demo-{i}", name="demo", launcher="local", job_file="demo.yaml",
                                        hosts=["vm"], world_size=2, state="succeeded", exit_code=0, created=1e9 + i,
                                        started=1e9 + i, ended=1e9 + i + 60))
    if argv[0] == "ps":
        argv = [*argv, "--runs-dir", str(runs)]
        # the first listing makes each forecast (and reads the job) once; the ones after read summaries alone
        subprocess.run([sys.executable, "-m", "cockpit", *argv], cwd=REPO, capture_output=True, timeout=60, check=True)
    code = PROBE.format(argv=argv, heavy=LISTING_NEEDS_NONE_OF)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    loaded = json.loads(r.stderr.rsplit("LOADED=", 1)[1])
    assert loaded == [], f"cockpit {' '.join(argv)} loaded {loaded}"
    if argv[0] == "ps":
        assert all(f"demo-{i}" in r.stdout for i in range(3)), r.stdout  # and listed the runs


# What the help (`cockpit --help`, `cockpit ps --help`) must not import: it builds every command's parser, ps's
# filter options among them (cockpit.cli.ps_options), but needs none of what listing runs reads: the run records
# and the listing (42% of the help's start, issue 29), dataclasses (and the inspect it pulls in), difflib, datetime.
HELP_NEEDS_NONE_OF = ("dataclasses", "inspect", "difflib", "datetime", "cockpit.run", "cockpit.insight",
                      "cockpit.cli.ps_filter", "cockpit.cli.ps")


@pytest.mark.parametrize("argv", [["--help"], ["ps", "--help"]])
def test_help_loads_no_run_record_listing_or_dataclasses(argv):
    code = PROBE.format(argv=argv, heavy=HELP_NEEDS_NONE_OF)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    loaded = json.loads(r.stderr.rsplit("LOADED=", 1)[1])
    assert loaded == [], f"cockpit {' '.join(argv)} loaded {loaded}"
    assert ("diagnose" if argv == ["--help"] else "--state STATE[,STATE]") in r.stdout, r.stdout  # and helped


# What `cockpit validate` and `cockpit render` of a local job must not import (issue 29: a start at the Python floor):
# what a run is (its status and records), the launchers' process tools and protocol, the nodes' records, asyncio and
# subprocess. They ask the job's launcher only for its file checks (validate) or its facts (render), so validate loads
# no renderer and render no preflight.
DRY_NEEDS_NONE_OF = ("asyncio", "subprocess", "cockpit.run.store", "cockpit.run.status", "cockpit.run.records",
                     "cockpit.launch.procs", "cockpit.launch.supervision", "cockpit.launch.protocol",
                     "cockpit.fleet.records")


# A Slurm job's validate and render also load none of the Slurm queries, scancel or the Slurm run side.
SLURM_DRY_NEEDS_NONE_OF = ("cockpit.launch.slurm.job", "cockpit.launch.slurm.preflight", "cockpit.slurm.query",
                           "cockpit.slurm.scancel", "cockpit.slurm.command")


@pytest.mark.parametrize(("argv", "also_not"), [
    (["validate", "jobs/demo.yaml"], ("cockpit.render",)),
    (["render", "jobs/demo.yaml"], ("cockpit.preflight",)),
    (["validate", "jobs/slurm.yaml"], ("cockpit.render", *SLURM_DRY_NEEDS_NONE_OF)),
    (["render", "jobs/slurm.yaml"], ("cockpit.preflight", *SLURM_DRY_NEEDS_NONE_OF))])
def test_validate_and_render_of_a_job_load_no_run_store_or_process_tools(argv, also_not):
    code = PROBE.format(argv=argv, heavy=DRY_NEEDS_NONE_OF + also_not)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    loaded = json.loads(r.stderr.rsplit("LOADED=", 1)[1])
    assert loaded == [], f"cockpit {' '.join(argv)} loaded {loaded}"
    # and did its work: validate said ok, render wrote the node script (torchrun) or the batch script (sbatch)
    wrote = "#SBATCH" if "slurm" in argv[1] else "torchrun"
    assert (f"{argv[1]}: ok" in r.stdout) if argv[0] == "validate" else (wrote in r.stdout), r.stdout


# What `cockpit validate` and `cockpit render` of a valid local job must not import (issue 29): socket (its enums
# are a tenth of a validate: the interface names come from _socket), difflib (only a wrong key or value asks for a
# did-you-mean) and the interface advice (only a job that sets GLOO_/NCCL_SOCKET_IFNAME is checked with it).
@pytest.mark.parametrize("argv", [["validate", "jobs/demo.yaml"], ["render", "jobs/demo.yaml"]])
def test_validate_and_render_of_a_valid_job_load_no_socket_difflib_or_interface_advice(argv):
    from cockpit.preflight import ifadvice, local

    assert local.IFNAME_VARS == (ifadvice.GLOO, ifadvice.NCCL)  # (spelled out there, so as not to import it)
    code = PROBE.format(argv=argv, heavy=("socket", "difflib", "cockpit.preflight.ifadvice"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    loaded = json.loads(r.stderr.rsplit("LOADED=", 1)[1])
    assert loaded == [], f"cockpit {' '.join(argv)} loaded {loaded}"
    assert (f"{argv[1]}: ok" in r.stdout) if argv[0] == "validate" else ("torchrun" in r.stdout), r.stdout


# PyYAML's pure-Python reader compiles a large character class at import (40% of `python -c pass`): imported
# through cockpit.spec it is compiled when the reader first uses it, and then refuses what it refused before.
DEFERRED_PATTERN = """
import re, sys
import cockpit.spec.model
import yaml
from cockpit.spec import pyyaml
held = yaml.reader.Reader.NON_PRINTABLE
deferred = type(held) is pyyaml._Deferred and held._compiled is None
try:
    yaml.load("a: b\\x07", Loader=yaml.SafeLoader)
    refused = False
except yaml.reader.ReaderError:
    refused = True
ok = yaml.load("a: caf\\u00e9", Loader=yaml.SafeLoader) == {"a": "caf\\u00e9"}
print(deferred, refused, ok, re.compile is pyyaml._compile, held.pattern == pyyaml.NON_PRINTABLE)
"""


def test_pyyamls_reader_pattern_is_compiled_when_first_used_and_refuses_the_same():
    r = subprocess.run([sys.executable, "-c", DEFERRED_PATTERN], capture_output=True, text=True, cwd=REPO,
                       timeout=60, check=True)
    # deferred until used (a PyYAML with another pattern: False, and this test says so); then the reader refuses a
    # control character and reads the rest as before; re.compile is re's own again
    assert r.stdout.split() == ["True", "True", "True", "True", "True"], r.stdout
