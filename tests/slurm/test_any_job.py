"""Any Slurm job of the user, submitted with plain sbatch (not by cockpit), on the test cluster: listed by
`cockpit ps --all`, its output read by `logs` (finished and running, `-f` to the job's end and exit code),
`attach`, and `diagnose` finding the error in a failed job's output; a node-local output path said clearly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, wait_for

from cockpit.run.records import NodeRecord, SlurmJob
from cockpit.run.status import RunStatus
from cockpit.slurm.arrays import run_jobs

pytestmark = pytest.mark.slow


def cockpit(cluster, cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**cluster.env, "COCKPIT_RUNS_DIR": str(cwd / "runs"), "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


def sbatch(cluster, cwd: Path, *args: str) -> str:
    r = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True, cwd=cwd, env=cluster.env,
                       timeout=30, check=True)
    return r.stdout.strip().split(";")[0]


def ended(cluster, job_id: str) -> bool:
    r = cluster.run("squeue", "--noheader", "--array", "--states=all", f"--jobs={job_id}", "--format=%T")
    states = r.stdout.split()
    return bool(states) and not {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING"} & set(states)


@pytest.fixture(scope="module")
def plain(slurm_cluster, tmp_path_factory):
    """Plain sbatch jobs, all ended: a --wrap that succeeds, an array with a custom --output pattern whose
    tasks exit with their index, a job that fails with a CUDA OOM on stderr (its own --error file), and one
    whose output goes to a path the login node cannot see (removed once the job ended)."""
    cwd = tmp_path_factory.mktemp("plain")
    (cwd / "nodelocal").mkdir()
    ids = {
        "wrap": sbatch(slurm_cluster, cwd, "--wrap", "echo hello from wrap"),
        "array": sbatch(slurm_cluster, cwd, "-J", "arr", "--array=0-2", "--output=out-%x-%j-%a.log",
                        "--wrap", "echo task $SLURM_ARRAY_TASK_ID; exit $SLURM_ARRAY_TASK_ID"),
        "fail": sbatch(slurm_cluster, cwd, "-J", "failer", "--output=f-%A_%a-%u-%t-%%.out", "--error=err-%j.txt",
                       "--wrap", "echo step 1; echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to "
                       "allocate 2.00 GiB' >&2; exit 3"),
        "local": sbatch(slurm_cluster, cwd, "-J", "loc", f"--output={cwd}/nodelocal/%j.out", "--wrap", "echo hi"),
    }
    for job_id in ids.values():
        wait_for(lambda j=job_id: ended(slurm_cluster, j), 60, f"job {job_id} to end")
    (cwd / "nodelocal" / f"{ids['local']}.out").unlink()  # as if written on the node's own /tmp
    return cwd, ids


def test_ps_all_lists_plain_jobs_beside_runs(slurm_cluster, plain):
    cwd, ids = plain
    r = cockpit(slurm_cluster, cwd, "ps", "--all")
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0]: line for line in r.stdout.splitlines()[1:]}
    assert "COMPLETED" in rows[ids["wrap"]] and ("n1" in rows[ids["wrap"]] or "n2" in rows[ids["wrap"]])
    assert "FAILED (NonZeroExitCode)" in rows[ids["fail"]]
    array = rows[f"{ids['array']}_*"]
    assert "arr" in array and "3 tasks: 2 failed, 1 completed" in array
    r = cockpit(slurm_cluster, cwd, "ps", "--all", "--json")
    jobs = {j["job_id"]: j for j in json.loads(r.stdout)["jobs"]}
    assert {f"{ids['array']}_{t}" for t in range(3)} <= set(jobs)
    task = jobs[f"{ids['array']}_2"]
    assert (task["state"], task["exit_code"], task["name"], task["run"]) == ("failed", 2, "arr", None)
    assert jobs[ids["fail"]]["stderr"].endswith("/err-%j.txt")


def test_logs_of_finished_jobs_resolve_their_output_patterns(slurm_cluster, plain):
    cwd, ids = plain
    r = cockpit(slurm_cluster, cwd, "logs", ids["wrap"])
    assert (r.returncode, r.stdout) == (0, "hello from wrap\n"), r.stderr
    r = cockpit(slurm_cluster, cwd, "logs", ids["array"])
    assert r.stdout.splitlines() == [f"[{ids['array']}_{t}] task {t}" for t in range(3)], r.stderr
    r = cockpit(slurm_cluster, cwd, "logs", f"{ids['array']}_1")
    assert r.stdout == "task 1\n"
    r = cockpit(slurm_cluster, cwd, "logs", ids["fail"])
    assert r.returncode == 0, r.stderr
    assert f"[{ids['fail']}:out] step 1" in r.stdout and f"[{ids['fail']}:err] torch.OutOfMemoryError" in r.stdout
    assert (cwd / f"f-{ids['fail']}_4294967294-root-0-%.out").exists()  # the name slurmstepd chose


def test_diagnose_finds_the_error_in_a_failed_jobs_output(slurm_cluster, plain):
    cwd, ids = plain
    r = cockpit(slurm_cluster, cwd, "diagnose", ids["fail"], "--json")
    assert r.returncode == 1, r.stderr
    report = json.loads(r.stdout)
    assert [f["code"] for f in report["findings"]][:1] == ["cuda_oom"]
    assert report["findings"][0]["evidence"][0]["path"].endswith(f"err-{ids['fail']}.txt")


def test_attach_to_an_ended_job_prints_its_end_and_exits_with_its_code(slurm_cluster, plain):
    cwd, ids = plain
    r = cockpit(slurm_cluster, cwd, "attach", ids["fail"])
    assert r.returncode == 3
    assert f"job {ids['fail']} (failer) ended: FAILED, exit code 3" in r.stdout


def test_a_node_local_output_path_is_said_with_where_and_how(slurm_cluster, plain):
    cwd, ids = plain
    for args in (("logs", ids["local"]), ("diagnose", ids["local"])):
        r = cockpit(slurm_cluster, cwd, *args)
        assert r.returncode != 0 and "Traceback" not in r.stderr
        assert f"nodelocal/{ids['local']}.out cannot be read here: No such file" in r.stderr
        assert "hint:" in r.stderr and "ssh n" in r.stderr


def test_an_unknown_job_is_one_clear_line(slurm_cluster, plain):
    cwd, _ = plain
    r = cockpit(slurm_cluster, cwd, "logs", "999999")
    assert r.returncode == 2 and "Slurm job 999999: neither squeue nor" in r.stderr and "Traceback" not in r.stderr


def test_logs_follow_a_running_job_to_its_end_and_exit_code(slurm_cluster, tmp_path):
    gate = tmp_path / "go"
    job = sbatch(slurm_cluster, tmp_path, "-J", "ticker", "--wrap",
                 f"echo first; while [ ! -e {gate} ]; do sleep 0.1; done; echo second; echo bad >&2; exit 5")
    wait_for(lambda: (tmp_path / f"slurm-{job}.out").exists(), 60, "the job to start")
    env = {**slurm_cluster.env, "COCKPIT_RUNS_DIR": str(tmp_path / "runs"), "PYTHONPATH": str(REPO)}
    follow = subprocess.Popen([sys.executable, "-m", "cockpit", "logs", "-f", job], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    attach = subprocess.Popen([sys.executable, "-m", "cockpit", "attach", job], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert follow.stdout.readline() == "first\n"
        wait_for(lambda: "attached to job" in _peek(attach), 30, "attach to say it is attached")
        gate.touch()
        out, err = follow.communicate(timeout=60)
        assert follow.returncode == 5, err
        assert out.splitlines()[:2] == ["second", "bad"]
        assert out.splitlines()[2].startswith(f"job {job} (ticker) ended: FAILED, exit code 5, NonZeroExitCode on n")
        out, err = attach.communicate(timeout=60)
        assert attach.returncode == 5, err
        assert "first" not in out and "second\n" in out  # attach shows what comes after it attached
    finally:
        for proc in (follow, attach):
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def _peek(proc: subprocess.Popen) -> str:
    """stderr's first line, once the process has written it (attach writes its banner there at once)."""
    import select

    ready, _, _ = select.select([proc.stderr], [], [], 0)
    return proc.stderr.readline() if ready else ""


def test_a_job_a_cockpit_run_submitted_belongs_to_that_run():
    status = RunStatus("sweep-1", "sweep", "slurm", "sweep.yaml", ["batch"], None, nodes=[
        NodeRecord("batch", 0, slurm=SlurmJob("41_0", array_job_id="41")),
        NodeRecord("batch", 1, slurm=SlurmJob("41_1", array_job_id="41")),
        NodeRecord("batch", 2, slurm=SlurmJob(None))])
    assert run_jobs([(Path("/runs/sweep-1"), status)]) == {"41": "sweep-1", "41_0": "sweep-1", "41_1": "sweep-1"}
