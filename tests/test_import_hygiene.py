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
              "plotext": ("plot/text.py", "tui"), "textual_plotext": "tui", "matplotlib": "plot/png.py"}
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
