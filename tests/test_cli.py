"""The CLI as a user meets it: real subprocesses, exit codes, stdout for data, stderr for problems."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch) -> Path:
    """Each test's own runs directory (never one shared under the system temp dir)."""
    runs = tmp_path / "runs"
    monkeypatch.setenv("COCKPIT_RUNS_DIR", str(runs))
    return runs


def cockpit(*args: str, cwd=REPO) -> subprocess.CompletedProcess:
    env = cockpit_env(COCKPIT_RUNS_DIR=os.environ["COCKPIT_RUNS_DIR"])
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=60)


def test_validate_ok():
    r = cockpit("validate", "jobs/demo.yaml", "jobs/sweep.yaml")
    assert r.returncode == 0 and r.stdout == "jobs/demo.yaml: ok\njobs/sweep.yaml: ok (6 trials)\n"


def test_validate_reports_every_problem_and_keeps_the_file(tmp_path):
    job = tmp_path / "job.yaml"
    text = "name: t\nscript: a.py\npg_backend: nccl\nbackend: ddpp\n"
    job.write_text(text)
    r = cockpit("validate", str(job))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"{job}:3:1: pg_backend: nccl needs GPUs and this job uses none (hint: use pg_backend: gloo (or auto), "
        "or pick gpus:)",
        f"{job}:4:1: backend: 'ddpp' is not one of ddp | dp | fsdp (hint: did you mean 'ddp'?)"]
    assert "Traceback" not in r.stderr and job.read_text() == text


def test_missing_file_is_a_clear_error():
    r = cockpit("validate", "jobs/nope.yaml")
    assert r.returncode == 2 and r.stderr == "cockpit: jobs/nope.yaml: no such job file (hint: try jobs/demo.yaml)\n"


def test_render_default_form_and_node_rank():
    r = cockpit("render", "jobs/demo.yaml")
    assert r.returncode == 0 and "-m torch.distributed.run" in r.stdout and "--nproc-per-node=2" in r.stdout
    r = cockpit("render", "jobs/ssh-2node.yaml", "--node-rank", "1")
    assert r.returncode == 0 and "--node-rank=1" in r.stdout and "--master-addr=gpu-node1" in r.stdout
    both = cockpit("render", "jobs/ssh-2node.yaml").stdout
    assert "===== node 0: gpu-node1" in both and "===== node 1: gpu-node2" in both


def test_render_says_an_auto_master_port_is_a_stand_in_on_stderr_only(tmp_path):
    auto = cockpit("render", "jobs/demo.yaml")  # master_port: auto (the default)
    assert auto.returncode == 0 and "--master-port=29500" in auto.stdout and "stands in" not in auto.stdout
    assert auto.stderr.startswith("cockpit: master_port: auto: the 29500 above stands in for the free"), auto.stderr
    job = tmp_path / "fixed.yaml"
    job.write_text(f"name: fixed\nscript: {REPO / 'jobs' / 'demo.py'}\nmaster_port: 29611\n")
    fixed = cockpit("render", str(job))
    assert fixed.returncode == 0 and "--master-port=29611" in fixed.stdout and fixed.stderr == "", fixed.stderr


def test_render_refuses_forms_that_would_not_run():
    r = cockpit("render", "jobs/demo.yaml", "--as", "sbatch")
    assert r.returncode == 2 and "hint: set launcher: slurm" in r.stderr and "Traceback" not in r.stderr
    r = cockpit("render", "jobs/demo.yaml", "--node-rank", "3")
    assert r.returncode == 2 and "out of range" in r.stderr


def test_render_sbatch_and_runs_dir():
    r = cockpit("render", "jobs/slurm.yaml", "--runs-dir", "/scratch/runs")
    assert r.returncode == 0 and "#SBATCH --output=/scratch/runs/dry-run/logs/agent.sbatch.log" in r.stdout


def test_help_and_version():
    assert cockpit("--help").returncode == 0
    r = cockpit("--version")
    assert r.returncode == 0 and r.stdout.startswith("cockpit ")


def test_bad_arguments_exit_2():
    r = cockpit("render")
    assert r.returncode == 2 and "usage:" in r.stderr


@pytest.mark.parametrize("grace", ["-1", "nan", "inf", "1e9", "ten"])
def test_a_grace_that_is_no_time_is_refused_before_anything_starts(grace, runs_dir):
    """`cockpit run JOB --grace -1` ran the job (and `stop --grace -1` stopped one) with a grace no stop can
    keep: -1, nan, inf reached the supervisor as given. Refused with the range, exit 2, no run made."""
    for args in (("run", "jobs/demo.yaml", "--grace", grace), ("stop", "last", "--grace", grace),
                 ("sweep", "rerun", "last", "--failed", "--grace", grace)):
        r = cockpit(*args)
        assert r.returncode == 2 and "argument --grace: " in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
        assert ("out of range 0..86400 seconds" if grace != "ten" else "expected seconds, got 'ten'") in r.stderr
    assert not runs_dir.exists() or not any(runs_dir.iterdir())
    assert cockpit("stop", "nope", "--grace", "0").stderr.startswith("cockpit: no run 'nope'")  # 0: kill at once


def test_diagnose_json_is_one_object_with_the_contract_keys():
    fixture = "tests/fixtures/nccl/elastic_03_address_already_in_use_runtimeerror_29500.log"
    r = cockpit("diagnose", fixture, "--json")
    assert r.returncode == 1  # an error finding
    data = json.loads(r.stdout)
    assert set(data) == {"files", "findings", "cause"}
    [f] = data["files"]
    assert f["path"] == fixture and f["kinds"] == ["port_in_use"]
    assert set(f) == {"path", "nccl_version", "networks", "kinds", "init_complete_ranks", "events"}
    assert all(set(e) == {"line", "kind", "rank", "host", "text"} for e in f["events"])
    assert data["findings"] and {"severity", "code", "title", "hint", "evidence"} <= set(data["findings"][0])


def test_diagnose_text_and_bad_input(tmp_path):
    clean = tmp_path / "clean.log"
    clean.write_text("epoch 1 loss 0.5\n")
    r = cockpit("diagnose", str(clean))
    assert r.returncode == 0 and "No problems found." in r.stdout
    r = cockpit("diagnose", str(tmp_path / "missing.log"))
    assert r.returncode == 2 and "no such log file or run" in r.stderr and "Traceback" not in r.stderr


def test_the_tui_entry_points_and_their_errors(tmp_path):
    """`cockpit tui --help` lists the TUI's own options; a bad run id is a one-line error before any screen
    opens (exit 2); `cockpit` alone is the TUI (driven in a real terminal in tests/tui/test_tmux.py)."""
    r = cockpit("tui", "--help")
    assert r.returncode == 0 and all(o in r.stdout for o in ("--nodes", "--job", "--run", "--theme"))
    assert "tui" in cockpit("--help").stdout
    r = subprocess.run([sys.executable, "-m", "cockpit", "tui", "--run", "no-such-run", "--runs-dir", str(tmp_path)],
                       capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("cockpit: ") and "Traceback" not in r.stderr


def test_render_of_an_ssh_job_exports_the_shells_nccl_variables_but_the_jobs_win():
    env = cockpit_env(NCCL_IB_DISABLE="1", NCCL_DEBUG="WARN")
    r = subprocess.run([sys.executable, "-m", "cockpit", "render", "jobs/ssh-2node.yaml"], capture_output=True,
                       text=True, cwd=REPO, env=env, timeout=60)
    assert r.returncode == 0 and "export NCCL_IB_DISABLE=1\n" in r.stdout
    assert "export NCCL_DEBUG=INFO\n" in r.stdout and "NCCL_DEBUG=WARN" not in r.stdout
    r = subprocess.run([sys.executable, "-m", "cockpit", "render", "jobs/demo.yaml"], capture_output=True,
                       text=True, cwd=REPO, env=env, timeout=60)
    assert r.returncode == 0 and "NCCL_IB_DISABLE" not in r.stdout  # local ranks inherit it; nothing to write


def test_output_to_a_full_disk_is_one_line_and_exit_1():
    """`cockpit render JOB > /dev/full`: the output cannot be written; said once, no traceback."""
    for args in (("render", "jobs/slurm.yaml"), ("validate", "jobs/demo.yaml")):
        env = cockpit_env(COCKPIT_RUNS_DIR=os.environ["COCKPIT_RUNS_DIR"])
        with open("/dev/full", "w") as full:
            r = subprocess.run([sys.executable, "-m", "cockpit", *args], stdout=full, stderr=subprocess.PIPE,
                               text=True, cwd=REPO, env=env, timeout=60)
        assert r.returncode == 1 and r.stderr == "cockpit: cannot write the output: No space left on device\n", args


def test_a_reader_that_left_changes_no_exit_code(runs_dir):
    """`cockpit logs RUN | head -1`: the reader closes the pipe; what cockpit still had to write goes nowhere,
    and the exit code is the command's own, never Python's 120 for a failed last flush."""
    from cockpit.run.store import RunStatus, write_status

    (runs_dir / "good-1" / "logs").mkdir(parents=True)
    write_status(runs_dir / "good-1", RunStatus(run_id="good-1", name="good", launcher="local", job_file="j.yaml",
                                                hosts=["vm"], world_size=2, state="succeeded", exit_code=0,
                                                created=1000.0))
    for rank in (0, 1):
        (runs_dir / "good-1" / "logs" / f"rank-{rank}.vm.log").write_text(f"hello from {rank}\n")
    env = cockpit_env(COCKPIT_RUNS_DIR=str(runs_dir))
    for args in (("logs", "good-1"), ("logs", "good-1", "-n", "1"), ("ps",), ("ps", "--json"),
                 ("validate", "jobs/demo.yaml"), ("render", "jobs/demo.yaml"), ("diagnose", "good-1")):
        read, write = os.pipe()
        os.close(read)  # the reader has already gone: the first write fails with EPIPE
        try:
            r = subprocess.run([sys.executable, "-m", "cockpit", *args], stdout=write, stderr=subprocess.PIPE,
                               text=True, cwd=REPO, env=env, timeout=60)
        finally:
            os.close(write)
        assert r.returncode == 0, (args, r.returncode, r.stderr)
        assert "Traceback" not in r.stderr and "Broken pipe" not in r.stderr, (args, r.stderr)
