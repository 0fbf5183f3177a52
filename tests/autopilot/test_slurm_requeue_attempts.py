"""Slurm's own requeue (a node set DOWN, `scontrol requeue`) as an attempt of the run: the batch script's start
lines read into the run's attempts (cockpit.launch.slurm.attempts.with_requeues, pure), numbered as the ranks'
COCKPIT_ATTEMPT is. The real requeue is tests/slurm/test_slurm_runs.py."""

from __future__ import annotations

from cockpit.cli.console import attempts_cell, attempts_lines
from cockpit.launch.slurm.attempts import REQUEUED, AttemptLog, with_requeues
from cockpit.launch.slurm.attempts import Attempt as Start
from cockpit.run.attempts import Attempt
from cockpit.run.status import RunStatus


def _no_end(_attempt: int) -> float | None:
    return None


def test_a_requeue_closes_the_attempt_and_starts_the_next():
    starts = [Start(0, "12", "n1", None, 1000.0), Start(1, "12", "n2", 15, 1200.0)]
    out = with_requeues([Attempt(0, 1000.5)], 0, starts, "12", 999.0, lambda n: 1100.0 if n == 0 else None)
    assert [(a.attempt, a.started, a.ended, a.end) for a in out] == [(0, 1000.5, 1100.0, "requeued"),
                                                                    (1, 1200.0, None, None)]
    assert out[0].cause == f"{REQUEUED} (SLURM_RESTART_COUNT=1, job 12)"
    assert out[0].decision == f"{REQUEUED}: attempt 1 started on n2"
    assert with_requeues(out, 0, starts, "12", 999.0, _no_end) is None  # seen once: nothing new


def test_a_run_without_recover_gets_its_first_attempt_from_the_jobs_first_start():
    starts = [Start(0, "12", "n1", None, 1000.0), Start(1, "12", "n1", None, 1300.0),
              Start(2, "12", "n1", None, 1600.0)]
    out = with_requeues([], 0, starts, "12", 999.0, _no_end)
    assert [(a.attempt, a.started, a.ended, a.end) for a in out] == [
        (0, 1000.0, 1300.0, "requeued"), (1, 1300.0, 1600.0, "requeued"), (2, 1600.0, None, None)]


def test_a_relaunched_jobs_requeue_numbers_on_from_its_submission_and_other_jobs_are_not_its():
    """recover: resubmitted the run as job 20 (attempt 1); job 12's starts in the same batch log are not its."""
    attempts = [Attempt(0, 1000.0, 1100.0, end="failure"), Attempt(1, 1150.0)]
    starts = [Start(0, "12", "n1", None, 1000.0), Start(0, "20", "n2", 5, 1150.0), Start(1, "20", "n3", 8, 1400.0)]
    out = with_requeues(attempts, 1, starts, "20", 999.0, _no_end)
    assert [(a.attempt, a.end) for a in out] == [(0, "failure"), (1, "requeued"), (2, None)]
    assert out[1].ended == 1400.0  # no exit record says when: the next start


def test_the_start_lines_are_read_with_their_time(tmp_path):
    batch = tmp_path / "agent.sbatch.log"
    batch.write_text("cockpit: start restart=0 job=12 nodes=n1 master=n1:1 time=1000\n"
                     "slurmstepd: error: *** JOB 12 ON n1 CANCELLED AT 2026-11-25T17:41:34 DUE TO JOB REQUEUE ***\n"
                     "cockpit: start restart=1 job=12 nodes=n2 master=n2:1 time=1200\n")
    (tmp_path / "logs").mkdir()
    assert [(a.restart, a.started) for a in AttemptLog(batch, tmp_path / "logs").read()] == [(0, 1000.0), (1, 1200.0)]


def test_ps_and_the_summary_count_a_requeue_without_recover():
    attempts = [Attempt(0, 1000.0, 1300.0, end="requeued", lost_s=40.0), Attempt(1, 1300.0, 1500.0, end="succeeded")]
    s = RunStatus(run_id="r", name="n", launcher="slurm", job_file="j", hosts=["n1"], world_size=1, state="succeeded",
                  created=999.0, started=1000.0, ended=1500.0, attempts=attempts)
    assert attempts_cell(s) == "2"
    assert attempts_cell(RunStatus(run_id="r", name="n", launcher="slurm", job_file="j", hosts=[], world_size=1,
                                   attempts=attempts[:1])) == "-"  # one attempt: nothing to count
    text = "\n".join(attempts_lines(s))
    assert "40.0 s to Slurm's requeues" in text and ": requeued" in text, text
