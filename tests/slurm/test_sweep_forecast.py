"""On the test Slurm cluster: the forecast of a run with a known step rate (tests/slurm/paced_train.py, one step
every 0.25 s, total_steps: from the job), and `cockpit sweep rerun --failed` resubmitting only the failed array
indices of a sweep with the same script."""

from __future__ import annotations

import json

import pytest
from slurm import test_slurm_runs as base
from slurm.test_slurm_runs import HERE, cockpit, only_run, read, start_cockpit, wait_for, write_job

from cockpit.insight.forecast_inputs import read_metrics, run_forecast
from cockpit.run.store import list_runs, read_status

pytestmark = pytest.mark.slow
runs = base.runs  # the fixture: a runs directory whose supervisors are ended after the test
PACE = 0.25  # seconds per step
STEPS = 48
TOLERANCE = 0.15  # of the run's remaining time; the machine is shared and a sleep only ever runs late


def paced_job(tmp_path, name, args, slurm: dict | None = None, **fields):
    # No in-allocation preflight (base.NO_PREFLIGHT): paced_train.py imports no torch, the preflight would, once
    # per array task, and it is not what these tests check (test_alloc_preflight.py does).
    path = write_job(tmp_path, name, script=HERE / "paced_train.py", args=args, nodes=1, procs_per_node=1,
                     slurm={**base.NO_PREFLIGHT, **(slurm or {})}, **fields)
    path.write_text(path.read_text() + f"total_steps: {STEPS}\n")
    return path


def test_the_forecast_of_a_run_with_a_known_step_rate(slurm_cluster, tmp_path, runs):
    job = paced_job(tmp_path, "paced", ["--steps", str(STEPS), "--sleep", str(PACE)], slurm={"time": "2"})
    start_cockpit(slurm_cluster, runs, "run", str(job), "-q")
    run_dir = wait_for(lambda: list_runs(runs) and list_runs(runs)[0][0], 30, "the run")
    wait_for(lambda: (read_metrics(run_dir).step or 0) >= 12, 90, "12 steps")
    status = read_status(run_dir)
    fc = run_forecast(run_dir, status)
    ps = cockpit(slurm_cluster, runs, "ps").stdout
    final = wait_for(lambda: (s := read_status(run_dir)) and s.final and s, 90, "the end")
    actual = read_metrics(run_dir).points[-1][0]  # when the last step was written
    error = fc.eta - actual
    print(f"forecast at step {fc.steps_done}: {fc.seconds_per_step:.3f} s/step (paced {PACE}), "
          f"{fc.remaining_s:.2f} s to go, ETA off by {error:+.2f} s ({error / fc.remaining_s:+.1%})")
    assert final.state == "succeeded", final.note
    assert fc.fits == "yes" and fc.requeues == 0 and fc.total_steps == STEPS and "to spare" in fc.why
    assert fc.seconds_per_step == pytest.approx(PACE, rel=TOLERANCE)
    assert abs(error) <= TOLERANCE * fc.remaining_s + 0.5, (fc, actual)
    assert fc.gpus == 0 and fc.gpu_hours == 0.0
    row = next(line for line in ps.splitlines() if line.startswith(status.run_id))
    assert " fits " in row and row.split()[-2] == "cpu", ps
    out = cockpit(slurm_cluster, runs, "attach", run_dir.name).stdout
    assert f"progress: ended at step {STEPS}/{STEPS}, 0.25 s/step; CPU-only" in out, out


def test_rerun_failed_submits_only_the_failed_array_indices(slurm_cluster, tmp_path, runs):
    marker = tmp_path / "fixed"
    job = paced_job(tmp_path, "arr", ["--steps", "4", "--sleep", "0.05"],
                    sweep={"grid": {"fail-unless": [str(tmp_path), str(marker), str(tmp_path), str(marker)]}})
    r = cockpit(slurm_cluster, runs, "run", str(job), "-q")
    assert r.returncode != 0, r.stdout + r.stderr
    old_dir, old = only_run(runs)
    assert [n.state for n in old.nodes] == ["succeeded", "failed", "succeeded", "failed"], old.nodes
    marker.write_text("now it exists\n")

    r = cockpit(slurm_cluster, runs, "sweep", "rerun", old.run_id, "--failed", "-q")
    assert r.returncode == 0, r.stdout + r.stderr
    [(new_dir, new)] = [(d, s) for d, s in list_runs(runs) if d != old_dir]
    script = read(new_dir / "commands/sbatch.sh")
    assert "#SBATCH --array=1,3\n" in script
    assert script == read(old_dir / "commands/sbatch.sh").replace(old.run_id, new.run_id).replace(
        "#SBATCH --array=0-3\n", "#SBATCH --array=1,3\n")
    array = new.nodes[0].slurm.array_job_id
    assert [(n.trial.index, n.slurm.job_id, n.state) for n in new.nodes] == [
        (1, f"{array}_1", "succeeded"), (3, f"{array}_3", "succeeded")]
    assert new.state == "succeeded" and f"(rerun of failed trials 1, 3 of {old.run_id})" in r.stdout, r.stdout
    assert sorted(p.name for p in new_dir.glob("trial-*")) == ["trial-1", "trial-3"]
    for i in (1, 3):
        assert f"cockpit: trial {i}: --fail-unless {marker}" in read(new_dir / f"logs/agent.trial-{i}.log")
    show = json.loads(cockpit(slurm_cluster, runs, "sweep", "show", new.run_id, "--json").stdout)
    assert [(t["trial"], t["state"], t["steps"]) for t in show["trials"]] == [(1, "succeeded", 4),
                                                                               (3, "succeeded", 4)]
    assert show["rerun_of"] == f"rerun of failed trials 1, 3 of {old.run_id}"
    assert read_status(old_dir).state == "failed"  # the old sweep is left as it ended, logs and all
    assert "paced: " in read(old_dir / "logs/agent.trial-1.log") or (old_dir / "trial-1").is_dir()
