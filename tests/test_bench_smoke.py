"""Every benchmark in tests/bench runs: each with ``--smoke`` (a second or a few of its real work), so none
rots between the times someone measures with it (bench_fleet failed with an ImportError for weeks).

The benchmarks themselves are not collected (tests/bench is in norecursedirs); this runs each as a user would,
``python tests/bench/bench_X.py --smoke``, and checks that it printed its result line. A new benchmark must
get a ``--smoke`` mode and an entry in ``RESULT``. Real processes: torch DDP (bench_train, bench_hang), torchrun
with stdlib ranks (bench_run), a private sshd (bench_fleet, through tests/fleet/sshd.py: needs root, like the
fleet tests), a pty (bench_tui).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import cockpit_env

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
BENCHES = sorted((ROOT / "tests" / "bench").glob("bench_*.py"))
RESULT = {  # what each benchmark prints once it has measured
    "bench_fleet.py": "cockpit/ssh-cm",
    "bench_hang.py": "stall -> finding",
    "bench_live.py": "every line shown: yes",
    "bench_parse.py": "x bare loop",
    "bench_plot.py": "x anchor",
    "bench_run.py": "every line shown once: yes",
    "bench_safety.py": "safety: every case measured",
    "bench_scale.py": "goals met:",
    "bench_startup.py": "x torchrun",
    "bench_tail.py": "latency write->delivery",
    "bench_train.py": "steps/s ratio cockpit/bare",
    "bench_tui.py": "tui/base",
}


def test_every_benchmark_has_a_smoke_run():
    assert sorted(p.name for p in BENCHES) == sorted(RESULT)


@pytest.mark.parametrize("bench", BENCHES, ids=lambda p: p.stem)
def test_benchmark_runs(bench: Path):
    env = cockpit_env()
    done = subprocess.run([sys.executable, str(bench), "--smoke"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert RESULT[bench.name] in output, output[-3000:]
