"""Every benchmark in tests/bench runs: each with ``--smoke`` (a second or a few of its real work), so none
rots between the times someone measures with it (bench_fleet failed with an ImportError for weeks).

The benchmarks themselves are not collected (tests/bench is in norecursedirs); this runs each as a user would,
``python tests/bench/bench_X.py --smoke``, and checks that it printed its result line. A new benchmark must
get a ``--smoke`` mode and an entry in ``RESULT``; a bench with a second mode (bench_train --hook) gets its
smoke run in ``MODES`` too. Real processes: torch DDP (bench_train, bench_hang), torchrun
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
    "bench_dense.py": "goal >= 1 M lines/s",
    "bench_fleet.py": "cockpit/ssh-cm",
    "bench_hang.py": "stall -> finding",
    "bench_hookcost.py": "x hook off",
    "bench_idle.py": "goal <= 1% of a core",
    "bench_live.py": "every line shown: yes",
    "bench_node_watch.py": "batched/per_file",
    "bench_parse.py": "goal >= 3 M lines/s",
    "bench_plot.py": "x anchor",
    "bench_ps.py": "goal <= 2x the loop",
    "bench_restart.py": "failure -> next first step",
    "bench_run.py": "every line shown once: yes",
    "bench_safety.py": "safety: every case measured",
    "bench_scale.py": "goals met:",
    "bench_startup.py": "goal <= 2.0x python -c pass",
    "bench_tail.py": "latency write->delivery",
    "bench_train.py": "steps/s ratio cockpit/bare",
    "bench_tui.py": "tui/base",
}
MODES = [  # (bench, its other mode's arguments, what that prints once it has measured)
    ("bench_train.py", ["--hook"], "goal median >= 0.99"),
    ("bench_idle.py", ["--engine", "--files", "16", "--idle", "1", "--rounds", "1"], "polling "),
    ("bench_tui.py", ["--on-charts"], "charts, m to the next chart"),
]


def test_every_benchmark_has_a_smoke_run():
    assert sorted(p.name for p in BENCHES) == sorted(RESULT)


def smoke(bench: Path, args: list[str], result: str) -> None:
    env = cockpit_env()
    done = subprocess.run([sys.executable, str(bench), *args, "--smoke"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert result in output, output[-3000:]


@pytest.mark.parametrize("bench", BENCHES, ids=lambda p: p.stem)
def test_benchmark_runs(bench: Path):
    smoke(bench, [], RESULT[bench.name])


@pytest.mark.parametrize(("name", "args", "result"), MODES,
                         ids=[f"{name[:-3]}{''.join(args)}" for name, args, _ in MODES])
def test_benchmark_mode_runs(name: str, args: list[str], result: str):
    smoke(ROOT / "tests" / "bench" / name, args, result)
