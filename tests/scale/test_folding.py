"""Folding (issue 32) through the real commands, on stand-in ranks (tests/scale): `cockpit stacks` folds the
ranks with the same stack into classes, the odd one first; the stall finding names its culprit alone and the
others as ranges; `logs -f` shows a line every rank wrote once, "[ranks 0-11] ...", and `--no-fold` each
rank's own. Small runs (12 ranks), seconds each; the 4,096-rank folding is tests/hang/test_fold.py's (pure)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from helpers import wait_for

from scale import harness, standin

HUNG_AT = f"load_batch (standin.py:{standin.load_batch.__code__.co_firstlineno})"
STEP = re.compile(r"^\[(ranks [^\]]+|[^:\]]+:\d+)\] \[cockpit\] step=(\d+) ", re.M)


@pytest.fixture
def launch(tmp_path):
    made: list[harness.Sim] = []

    def go(ranks: int, nodes: int, **kwargs) -> harness.Sim:
        home = tmp_path / f"sim{len(made)}"
        home.mkdir()
        sim = harness.launch_local(ranks, nodes, home=home, **kwargs)
        made.append(sim)
        sim.wait_up(120)
        return sim

    yield go
    for sim in made:
        sim.close()


def ranks_of(label: str) -> list[int]:
    """'ranks 0-3,7' or 'host:5' -> the ranks."""
    if not label.startswith("ranks "):
        return [int(label.rsplit(":", 1)[1])]
    out: list[int] = []
    for part in label[len("ranks "):].split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def steps_shown(text: str) -> dict[int, list[int]]:
    """rank -> the steps of its progress lines in `cockpit run` / `logs -f` output, in the order shown."""
    out: dict[int, list[int]] = {}
    for m in STEP.finditer(text):
        for rank in ranks_of(m.group(1)):
            out.setdefault(rank, []).append(int(m.group(2)))
    return out


def test_cockpit_stacks_folds_a_straggler_s_class_first_and_any_rank_is_one_flag_away(launch):
    sim = launch(12, 3)
    sim.straggle(5)

    def folded() -> str | None:  # once rank 5's stack is caught in its own code (98% of its step)
        r = sim.cockpit("stacks", sim.run_id)
        return r.stdout if r.returncode == 0 and "== 1 rank: outside any collective" in r.stdout else None

    text = wait_for(folded, 60, "rank 5's stack in load_batch, folded")
    lines = text.splitlines()
    assert lines[0].startswith("12 ranks on 3 hosts: 2 different stacks, the fewest ranks first")
    assert lines[1] == f"== 1 rank: outside any collective, at {HUNG_AT} =="
    assert lines[2].split(";")[0] == "   rank 5 on n1"  # then the Flight Recorder's number, where it has one
    rest = next(i for i, line in enumerate(lines) if line.startswith("== 11 ranks: in all_reduce, at train_step"))
    assert lines[rest + 1].split(";")[0] == "   ranks 0-4, 6-11 on n[0-2]" and "-- rank " not in text
    one = sim.cockpit("stacks", sim.run_id, "--rank", "7")
    assert one.returncode == 0 and "\n-- rank 7 (in all_reduce, at train_step" in one.stdout
    assert "-- rank 5 " not in one.stdout and "different stack" not in one.stdout  # one rank: its stack only


def test_a_hung_rank_is_named_alone_and_the_others_as_ranges(launch):
    sim = launch(12, 3, stall_after=3)
    sim.hang(9)
    found = wait_for(lambda: sim.finding("stall"), 60, "the watchdog's stall finding")
    assert [c["rank"] for c in found["culprits"]] == [9]
    assert f"rank 9 (n2) is stuck in {HUNG_AT}, outside any collective; ranks 0-8, 10, 11 wait in all_reduce" \
        in found["text"]
    # the stall's stacks, kept (written just after the finding): the classes, then every rank's own
    kept = wait_for(lambda: Path(found["stacks"]).is_file() and Path(found["stacks"]).read_text(), 30, "the stacks")
    assert kept.index(f"== 1 rank: outside any collective, at {HUNG_AT} ==") < kept.index("== 11 ranks: in all_reduce")
    assert kept.count("\n-- rank ") == 12


def test_logs_follow_shows_a_line_every_rank_wrote_once_and_no_fold_each_rank_s(tmp_path):
    job = tmp_path / "twelve.yaml"
    job.write_text(harness.job_text("twelve", 12, None, stall_after=60, args=("--steps", "3", "--same-lines")))
    env = harness.cockpit_env(tmp_path / "runs", tmp_path)

    def cockpit(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([harness.sys.executable, "-m", "cockpit", *args], capture_output=True, text=True,
                              cwd=harness.REPO, env=env, timeout=120)

    run = cockpit("run", str(job))
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    every = {r: [1, 2, 3] for r in range(12)}
    assert steps_shown(run.stdout) == every  # live: each rank's line once, in order (folded as they came)
    ended = cockpit("logs", "-f", "last")  # an ended run's lines, read whole: every step one line
    assert ended.returncode == 0 and steps_shown(ended.stdout) == every
    assert [m.group(1) for m in STEP.finditer(ended.stdout)] == ["ranks 0-11"] * 3
    plain = cockpit("logs", "-f", "last", "--no-fold")
    assert steps_shown(plain.stdout) == every and len(STEP.findall(plain.stdout)) == 36
    assert not any(label.startswith("ranks ") for label, _ in STEP.findall(plain.stdout))
