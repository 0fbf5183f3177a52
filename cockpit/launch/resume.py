"""`cockpit run --resume RUN`: the next attempt of a local run that was stopped (or failed, or lost its
supervisor), in the same run directory, as recover: relaunches one (cockpit.launch.attempt_files): the same
run id, its node script as rendered, COCKPIT_ATTEMPT one more, the ended attempt's records set aside in
logs/attempt-<N>/ and a marker line in every log; cockpit.train resumes from the run's last checkpoint.

``refusal`` says why a run cannot be resumed (pure, on the run's status and what its directory holds);
``prepare`` makes the directory ready for the supervisor, which `cockpit run` then starts as for a new run."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

from cockpit import contract
from cockpit.launch import attempt_files, registry
from cockpit.run import layout
from cockpit.run.attempts import Attempt
from cockpit.run.store import RunStatus, is_sweep, write_status

RESUMABLE = ("stopped", "failed", "lost")


@dataclass(frozen=True)
class Facts:
    """What `run --resume` needs to know of a run besides its status: its directory's files, its processes."""

    has_job: bool  # job.yaml, the job the run was started with
    has_script: bool  # commands/node-0.sh, the script its attempts run
    alive: int  # processes of the run still running (COCKPIT_RUN_ID in their environment)


def facts(run_dir: Path, status: RunStatus) -> Facts:
    from cockpit.launch import procs

    return Facts((run_dir / layout.JOB).is_file(), layout.node_script(run_dir, 0).is_file(),
                 len(procs.run_pids(status.run_id)))


def refusal(status: RunStatus, found: Facts) -> str | None:
    """Why ``status``'s run cannot be resumed, with a hint; None where it can."""
    name = status.run_id
    launcher = registry.known_for_run(status)
    instead = launcher.resume_instead if launcher is not None else "cockpit run {job}"
    if instead is not None or is_sweep(status):
        what = "a sweep" if is_sweep(status) else f"a {status.launcher} run"
        hint = (instead or "cockpit run {job}").format(run=name, job=status.job_file)
        return f"run {name} is {what}: only a local run is resumed here (hint: {hint})"
    if not status.final or found.alive:
        why = f"{found.alive} of its processes still run" if status.final else f"it is {status.state}"
        return f"run {name} cannot be resumed: {why} (hint: cockpit attach {name}, or cockpit stop {name} first)"
    if status.state == "succeeded":
        return (f"run {name} succeeded: there is nothing to continue (hint: cockpit run {status.job_file} "
                "starts a new run)")
    if status.state not in RESUMABLE:
        return f"run {name} is {status.state}: only a stopped, failed or lost run is resumed"
    if not found.has_job or not found.has_script:
        missing = layout.JOB if not found.has_job else layout.node_script_name(0)
        return (f"run {name} has no {missing}: it cannot be started again as it was (hint: cockpit run "
                f"{status.job_file} starts a new run)")
    return None


def next_attempt(status: RunStatus) -> int:
    """The attempt a resume starts: one more than the run's last (a run without recover: had attempt 0 only)."""
    return max(len(status.attempts), 1)


def prepare(run_dir: Path, status: RunStatus, now: float | None = None) -> RunStatus:
    """Make the run directory ready for its next attempt and write its `starting` status (returned): the
    ended attempt's records go to logs/attempt-<N>/ (its stop.json too), a marker line goes into every log,
    and the status keeps the run's identity, its start, its attempts and its stall history."""
    now = time.time() if now is None else now
    attempt = next_attempt(status)
    attempts = list(status.attempts) or [Attempt(0, status.started or status.created)]
    last = attempts[-1]
    if last.ended is None:  # a run without recover: (or a lost one): its attempt is closed here
        end = "stopped" if status.state == "stopped" else "failure"
        attempts[-1] = replace(last, ended=status.ended or now, end=end, decision="resumed by cockpit run --resume")
    else:
        attempts[-1] = replace(last, decision=_join(last.decision, "resumed by cockpit run --resume"))
    attempt_files.set_aside(run_dir, attempt - 1)
    with contextlib.suppress(FileNotFoundError):
        os.replace(run_dir / layout.STOP, run_dir / layout.LOGS / f"attempt-{attempt - 1}" / layout.STOP)
    _mark(run_dir, attempt, status.state)
    new = replace(status, state="starting", ended=None, exit_code=None, supervisor=None, ranks={},
                  first_failure=None, stop_requested=False, stopped_at=None, note=None, progress={}, findings=[],
                  watch=None, attempts=attempts, goodput=None, restarts=[])
    write_status(run_dir, new)
    return new


def _mark(run_dir: Path, attempt: int, was: str) -> None:
    """The attempt's marker line in every rank and agent log (the diagnosis reads the last attempt's part)."""
    attempt_files.mark_line(run_dir, f"{contract.ATTEMPT_MARK}{attempt} (COCKPIT_ATTEMPT={attempt}): resumed by "
                                f"cockpit run --resume after the run was {was}")


def _join(*words: str | None) -> str:
    return "; ".join(w for w in words if w)
