"""The goodput of a run stopped by a person and resumed later (`cockpit run --resume`): the hour it spent ended
is neither training nor lost to a failure, so it is left out of the wall time and of the stop's lost time, and
said on its own (cockpit.run.attempts). Recorded attempt records, pure; the real run is
tests/test_run_resume.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cockpit.cli.console import attempts_lines
from cockpit.run.attempts import Attempt, goodput, lost_seconds, paused_seconds, pauses, restart_latencies
from cockpit.run.status import RunStatus
from cockpit.tui.models.attempt_line import rows

HOUR = 3600.0
# attempt 0: steps 1..20, one a second from t=1001, a checkpoint at 15; stopped at t=1020.5. An hour later a person
# resumes it: attempt 1 starts at t=4620.5, resumes from step 15, trains 16..40 one a second from t=4625.
RECORDS = [(1000.0 + s, s) for s in range(1, 21)] + [(4609.0 + s, s) for s in range(16, 41)]
STOPPED = Attempt(0, 1000.0, ended=1020.5, end="stopped", first_step=1001.0, step=20,
                  decision="resumed by cockpit run --resume")
RESUMED = Attempt(1, 1020.5 + HOUR, ended=4650.0, end="succeeded", resumed_from=15, first_step=4625.0, step=40,
                  resumed=True)


def test_the_pause_before_a_resume_is_not_in_the_wall_time():
    attempts = [STOPPED, RESUMED]
    assert pauses(attempts) == [0.0, HOUR] and paused_seconds(attempts) == HOUR
    # kept: steps 1..15 (15 s) and 16..40 (25 s) of a wall of 3650 s less the hour: 40 of 50 s
    assert goodput(attempts, RECORDS, 1000.0, 4650.0) == pytest.approx(40 / 50)
    # the stop cost steps 16..20 made again (5 s), the teardown (0.5 s) and the restart to the first step (4.5 s)
    assert lost_seconds(attempts, RECORDS) == [10.0, None]
    assert restart_latencies(attempts) == [4.5]  # from the resume, not from the stop an hour before


def test_a_relaunch_by_recover_is_no_pause():
    """The same gap after a failure that recover: relaunched is the failure's cost, in the wall time."""
    failed = [Attempt(0, 1000.0, ended=1020.5, end="failure", failed=1020.0),
              Attempt(1, 1020.5 + HOUR, resumed_from=15, first_step=4625.0)]
    assert paused_seconds(failed) == 0.0
    assert goodput(failed, RECORDS, 1000.0, 4650.0) == round(40 / 3650, 4)  # (goodput is rounded to 4 places)
    assert lost_seconds(failed, RECORDS) == [3610.0, None]


def test_the_summary_says_the_pause_apart_from_the_lost_time():
    s = RunStatus(run_id="r", name="n", launcher="local", job_file="j", hosts=["vm"], world_size=1,
                  state="succeeded", created=999.0, started=1000.0, ended=4650.0,
                  attempts=[replace(STOPPED, lost_s=10.0), RESUMED], goodput=0.8)
    text = "\n".join(attempts_lines(s))
    assert "goodput 80%" in text and "lost: 10.0 s to stops" in text, text
    assert "stopped (by user): 60.0 min" in text, text
    assert "first step 4.5 s after the stop" in text, text
    assert "resumed after 3600 s stopped" in rows([STOPPED, RESUMED], 5000.0)[1]


def test_a_resumed_attempt_round_trips_and_an_older_one_reads_unchanged():
    assert Attempt.from_dict(RESUMED.to_dict()) == RESUMED and RESUMED.to_dict()["resumed"] is True
    assert "resumed" not in STOPPED.to_dict()  # a status.json of an older cockpit reads and writes back as it was


@pytest.mark.parametrize(("end", "words"), [("stopped", "attempt 0 was stopped"),
                                            ("failure", "attempt 0 ended by a failure"),
                                            ("stall", "attempt 0 ended by a stall"),
                                            ("requeued", "attempt 0 was requeued by Slurm"),
                                            (None, "attempt 0 ended (how is unknown)")])
def test_an_earlier_attempts_finding_says_how_it_ended_in_words(end, words):
    """The TUI's findings, `diagnose` and the run summary showed `attempt 0 ended by stopped` for a run stopped and
    resumed (found on a fresh clone, issue 33's new-user pass)."""
    from cockpit.insight.diagnosis import attempt_title

    assert attempt_title(replace(STOPPED, end=end, cause=None)) == words
    assert attempt_title(replace(STOPPED, end=end, cause="rank 1 raised X")) == f"{words}: rank 1 raised X"
