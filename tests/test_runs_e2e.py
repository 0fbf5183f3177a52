"""`cockpit run` and friends against real torchrun + gloo DDP runs of the demo (2 CPU ranks)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env, wait_for

from cockpit.launch import procs
from cockpit.run.store import list_runs, read_status

pytestmark = pytest.mark.slow
SHORT = ["--", "--epochs", "1", "--steps-per-epoch", "30"]


def env_for(runs: Path) -> dict[str, str]:
    return cockpit_env(COCKPIT_RUNS_DIR=str(runs), NO_COLOR="1")


def cockpit(runs: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=REPO,
                          env=env_for(runs), timeout=timeout)


def only_run(runs: Path):
    [(run_dir, status)] = list_runs(runs)
    return run_dir, status


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """One succeeded demo run, shown (not -q), that two tests read: its directory and its logs."""
    runs = tmp_path_factory.mktemp("demo")
    return runs, cockpit(runs, "run", "jobs/demo.yaml", *SHORT)


def test_demo_completes_with_logs_metrics_and_summary(demo):
    runs, r = demo
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir, status = only_run(runs)
    assert status.state == "succeeded" and status.exit_code == 0
    assert {rank: p.state for rank, p in status.progress.items()} == {"0": "exited", "1": "exited"}
    host = status.hosts[0]
    logs = sorted(p.name for p in (run_dir / "logs").glob("rank-*.log"))
    assert logs == [f"rank-0.{host}.log", f"rank-1.{host}.log"]
    for rank in (0, 1):
        assert f"[{host}:{rank}] [cockpit] start rank={rank} world=2" in r.stdout
        metrics = (run_dir / "metrics" / f"rank-{rank}.jsonl").read_text().splitlines()
        assert metrics and json.loads(metrics[-1])["step"] == 30
    assert f"== demo ({status.run_id}): succeeded in" in r.stdout
    assert oct((run_dir).stat().st_mode & 0o777) == "0o700"
    assert (run_dir / "job.yaml").read_text() == (REPO / "jobs/demo.yaml").read_text()
    assert (run_dir / "commands/node-0.sh").read_text().count("--nproc-per-node=2") == 1


def test_raising_rank_is_named_with_its_traceback_and_nothing_is_left(tmp_path):
    r = cockpit(tmp_path, "run", "jobs/demo.yaml", "-q", *SHORT, "--fail-rank", "1", "--fail-step", "5")
    assert r.returncode != 0
    run_dir, status = only_run(tmp_path)
    assert status.state == "failed" and status.first_failure.rank == 1
    assert "first failure: rank 1 on" in r.stdout and "exit code 1" in r.stdout
    assert "RuntimeError: injected failure on rank 1 after step 5" in r.stdout
    # The diagnosis follows the summary; the launcher's teardown was announced live on stderr.
    # torchelastic's root cause when it agrees with the exit records (with the rank's own exception when its log
    # has one), else theirs (1 s timestamps tie)
    # (or, where torchelastic named rank 0, which only lost its peer, rank 1's own log says so: issue 26)
    assert "diagnosis:" in r.stdout and re.search(r"First failure \((torchelastic root cause(, its own log)?|exit "
                                                  r"records|its own log; torchelastic named the rank that lost its "
                                                  r"peer)\): rank 1 on", r.stdout), r.stdout
    assert "torchrun stopped the workers" in r.stderr  # the live note, in words (was the kind code worker_failed)
    assert procs.run_pids(status.run_id) == []
    # -q (was test_run_quiet's own failing run): the summary first, no rank line, the exit code the job's, and
    # the notes of the failure (torchrun's worker_failed, the exception) said as they happen
    first = r.stdout.splitlines()[0]
    assert first.startswith("== demo (demo-") and f"exit code {r.returncode}" in first, r.stdout
    assert not [line for line in r.stdout.splitlines() if line.startswith("[")], r.stdout
    assert [line for line in r.stderr.splitlines() if line.startswith("cockpit: [")], r.stderr


def test_sigkilled_rank_0_is_first_failure_and_the_rest_stop_quickly(tmp_path):
    r = cockpit(tmp_path, "run", "jobs/demo.yaml", "-q", *SHORT, "--fail-rank", "0", "--fail-step", "5",
                "--fail-mode", "kill")
    assert r.returncode != 0
    run_dir, status = only_run(tmp_path)
    first = status.first_failure
    assert (first.rank, first.signal) == (0, signal.SIGKILL)
    assert "first failure: rank 0 on" in r.stdout and "killed by SIGKILL" in r.stdout
    # rank 1's exit record was missing once (1 of ~16 runs, under xdist, not reproduced since): say what was there
    assert "1" in status.ranks, (r.stdout, r.stderr, sorted(p.name for p in (run_dir / "logs").iterdir()),
                                 (run_dir / "logs" / "supervisor.log").read_text(errors="replace")[-4000:])
    other = status.ranks["1"]
    assert other.time - first.time <= 30
    assert status.ended - first.time <= 30
    assert procs.run_pids(status.run_id) == []


def test_killing_cockpit_does_not_stop_training_and_attach_reports_the_end(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", "jobs/demo.yaml", "--", "--epochs", "1",
                             "--steps-per-epoch", "100"], cwd=REPO, env=env_for(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    run_dir = wait_for(lambda: list_runs(tmp_path) and list_runs(tmp_path)[0][0], 30, "the run directory")
    wait_for(lambda: "step=10 " in _read(run_dir, "logs/rank-0"), 60, "training to start")
    proc.kill()
    streamed = proc.communicate(timeout=10)[0]
    status = wait_for(lambda: (s := read_status(run_dir)) and s.final and s, 120, "the run to finish")
    assert status.state == "succeeded"
    for rank in (0, 1):
        log = _read(run_dir, f"logs/rank-{rank}")
        assert f"[cockpit] finish rank={rank} step=100 exit_code=0" in log
        # What cockpit streamed before it died is a prefix of the file: nothing reordered or invented.
        prefix = f"[{status.hosts[0]}:{rank}]"
        mine = [line.split("] ", 1)[1] for line in streamed.splitlines() if line.startswith(prefix)]
        assert mine == log.splitlines()[:len(mine)]
    metrics = (run_dir / "metrics/rank-0.jsonl").read_text().splitlines()
    assert [json.loads(m)["step"] for m in metrics][-1] == 100
    r = cockpit(tmp_path, "attach", "last")
    assert r.returncode == 0 and f"== demo ({status.run_id}): succeeded" in r.stdout


def test_supervisor_killed_run_is_found_and_marked_by_ps(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", "jobs/demo.yaml", "-q", *SHORT],
                            cwd=REPO, env=env_for(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_dir = wait_for(lambda: list_runs(tmp_path) and list_runs(tmp_path)[0][0], 30, "the run directory")
    sup = wait_for(lambda: (s := read_status(run_dir)) and s.supervisor, 30, "the supervisor")
    os.kill(sup["pid"], signal.SIGKILL)
    proc.kill()
    proc.wait()
    run_id = run_dir.name
    wait_for(lambda: not procs.run_pids(run_id), 120, "the ranks to finish on their own")
    r = cockpit(tmp_path, "ps", "--json")
    [run] = json.loads(r.stdout)["runs"]
    assert run["state"] == "succeeded" and "supervisor died" in run["note"]
    fc = run["forecast"]  # what the FORECAST / GPU-H columns say, read from the metrics cockpit.train wrote
    assert (fc["ended"], fc["steps_done"], fc["total_steps"], fc["gpus"]) == (True, 30, 30, 0), fc


def test_logs_and_filters(demo):
    runs, run = demo
    assert run.returncode == 0, run.stdout + run.stderr
    run_dir, status = only_run(runs)
    host = status.hosts[0]
    r = cockpit(runs, "logs", status.run_id[:12], "--rank", "1")
    assert r.returncode == 0 and r.stdout == (run_dir / f"logs/rank-1.{host}.log").read_text()
    r = cockpit(runs, "logs", "last", "-n", "1")
    assert r.stdout.splitlines() == [f"[{host}:0] [cockpit] finish rank=0 step=30 exit_code=0",
                                     f"[{host}:1] [cockpit] finish rank=1 step=30 exit_code=0"]
    assert cockpit(runs, "logs", "nope").returncode == 2


def _read(run_dir: Path, stem: str) -> str:
    paths = list(run_dir.glob(stem + ".*.log"))
    return paths[0].read_text(errors="replace") if paths else ""


def test_cockpit_stop_gives_each_rank_one_sigterm(tmp_path):
    """torchrun passes SIGTERM to each rank wrapper and the wrapper to its rank; signalling them all besides
    would deliver it two or three times, and Lightning's handler acts on each."""
    job = tmp_path / "term.yaml"
    job.write_text(f"name: term\nscript: {REPO / 'tests/term_count.py'}\n")
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(job), "-q", "--grace", "20"], cwd=REPO,
                            env=env_for(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_dir = wait_for(lambda: list_runs(tmp_path) and list_runs(tmp_path)[0][0], 30, "the run directory")

    def logs() -> str:
        return "".join(p.read_text() for p in (run_dir / "logs").glob("rank-*.log"))
    wait_for(lambda: logs().count("term ready") == 2, 60, "both ranks to handle SIGTERM")
    r = cockpit(tmp_path, "stop", run_dir.name, "--grace", "20")
    proc.communicate(timeout=60)
    assert r.returncode == 0, r.stderr
    assert logs().count("term count 1") == 2, logs()


EXITS_BY_ITSELF = """import os, sys, time
rank = int(os.environ["RANK"])
print(f"rank {rank} working", flush=True)
if rank == 1:
    print("no data left in shard 1: stopping", flush=True)
    sys.exit(3)
time.sleep(60)
"""


def test_a_rank_that_exits_without_a_traceback_is_named_at_its_last_line(tmp_path):
    """sys.exit(3) leaves no traceback: the finding says so and points at the log's last line (the rank's own
    last words), not at its first."""
    (tmp_path / "quits.py").write_text(EXITS_BY_ITSELF)
    (tmp_path / "job.yaml").write_text("name: quits\nscript: quits.py\nlauncher: local\ngpus: none\n")
    runs = tmp_path / "runs"
    r = cockpit(runs, "run", str(tmp_path / "job.yaml"), "-q", "--grace", "5")
    assert r.returncode != 0, r.stdout + r.stderr
    run_dir, status = only_run(runs)
    assert status.first_failure is not None and status.first_failure.rank == 1, r.stdout
    d = json.loads(cockpit(runs, "diagnose", status.run_id, "--json").stdout)
    [first] = [f for f in d["findings"] if f["code"] == "first_failure"]
    assert "exit code 3: no traceback: the script exited by itself" in first["title"], first
    [(path, line)] = [(e["path"], e["line"]) for e in first["evidence"]]
    lines = Path(path).read_text().splitlines()
    assert path.endswith(f"rank-1.{status.hosts[0]}.log") and line == len(lines), (line, lines)
    assert lines[line - 1].endswith("no data left in shard 1: stopping"), lines
