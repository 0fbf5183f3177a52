"""cockpit.requeue, the stop flag any script can use: real processes, real signals. A plain DDP script (no
cockpit.train) under the local launcher gets a real SIGUSR1 on one rank; both ranks stop at the same step, rank
0's checkpoint is on disk, and the run succeeds. The requeue itself is tested on a real Slurm (tests/slurm)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env, wait_for

from cockpit.run.store import list_runs

# Stdlib only: the helper must work in a script that never imports torch.
WAITER = textwrap.dedent("""
    import sys, time
    import cockpit.requeue
    stop = cockpit.requeue.watch()
    print("ready", "torch" in sys.modules, flush=True)
    while not stop.requested:
        time.sleep(0.01)
    print("saved", stop.signal_name, flush=True)
    stop.requeue_or_exit()
""")


def waiter(env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", WAITER], cwd=REPO, text=True, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready False\n"  # handlers are in place; torch was never imported
    return proc


def clean_env(**extra: str) -> dict[str, str]:
    return cockpit_env(**extra)


@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGTERM])
def test_a_stop_signal_only_sets_the_flag_and_without_requeue_the_script_just_ends(sig):
    proc = waiter(clean_env())
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out == (f"saved {sig.name}\n[cockpit] stop requested ({sig.name}); not requeued: COCKPIT_REQUEUE is "
                   "not 1 (set slurm.requeue: true)\n")


def test_requeue_asked_for_runs_scontrol_on_rank_0_and_a_failure_exits_1_with_a_hint():
    # No scontrol on PATH: the failure path, for real. The success path needs a real Slurm (tests/slurm).
    proc = waiter(clean_env(COCKPIT_REQUEUE="1", SLURM_JOB_ID="4242", PATH="/nonexistent"))
    proc.send_signal(signal.SIGUSR1)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and out == "saved SIGUSR1\n"
    assert err.startswith("[cockpit] stop requested (SIGUSR1); `scontrol requeue 4242` failed: ")
    assert "hint: is scontrol on PATH on the compute node?" in err


def test_other_ranks_leave_the_requeue_to_rank_0():
    proc = waiter(clean_env(COCKPIT_REQUEUE="1", SLURM_JOB_ID="4242", RANK="1", PATH="/nonexistent"))
    proc.send_signal(signal.SIGUSR1)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.endswith("; rank 0 requeues the job\n")


def test_array_tasks_requeue_their_own_task():
    from cockpit.requeue import Stop, requeue_job_id

    env = {"COCKPIT_REQUEUE": "1", "SLURM_JOB_ID": "7", "SLURM_ARRAY_JOB_ID": "5", "SLURM_ARRAY_TASK_ID": "2"}
    assert requeue_job_id(env) == "5_2" and Stop(env).will_requeue
    assert requeue_job_id({**env, "COCKPIT_REQUEUE": "0"}) is None
    assert not Stop({**env, "RANK": "3"}).will_requeue


@pytest.mark.slow
def test_plain_ddp_script_under_the_local_launcher_stops_all_ranks_on_one_usr1(tmp_path):
    job = tmp_path / "plain.yaml"
    job.write_text(f"name: plain\nscript: {REPO / 'jobs' / 'plain_requeue.py'}\nargs: [--steps, '100000']\n"
                   "launcher: local\ngpus: none\n")
    env = {**clean_env(), "COCKPIT_RUNS_DIR": str(tmp_path / "runs"), "NO_COLOR": "1"}
    run = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(job)], cwd=REPO, env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        run_dir = wait_for(lambda: next((d for d, _ in list_runs(tmp_path / "runs")), None), 60, "the run")
        logs = Path(run_dir) / "logs"
        host = json.loads((Path(run_dir) / "status.json").read_text())["hosts"][0]
        wait_for(lambda: all("ready at step 0" in _read(logs / f"rank-{r}.{host}.log") for r in (0, 1)), 120,
                 "both ranks ready")
        os.kill(int((logs / f"rank-1.{host}.pid").read_text()), signal.SIGUSR1)  # one rank only, as a straggling signal
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, out
    steps = set()
    for rank in (0, 1):
        log = _read(logs / f"rank-{rank}.{host}.log")
        steps |= {line.split()[-1] for line in log.splitlines() if "stopping after step" in line}
        why = "SIGUSR1" if rank == 1 else "on another rank"
        assert f"[cockpit] stop requested ({why}); not requeued: COCKPIT_REQUEUE is not 1" in log
    assert len(steps) == 1  # both ranks stopped after the same step
    assert (Path(run_dir) / "checkpoints" / "plain.pt").stat().st_size > 0
    assert "succeeded" in out


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""
