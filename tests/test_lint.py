"""ruff over the whole repository: part of the suite so CI enforces it."""

from __future__ import annotations

import subprocess
import sys

from helpers import REPO


def test_ruff_clean():
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "."], capture_output=True, text=True, cwd=REPO,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
