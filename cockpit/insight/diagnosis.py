"""A run's diagnosis: its logs (cockpit.logs) with what its status.json knows — the first failure to the
nanosecond, ranks that aborted in teardown, a stop's echoes left out, and cockpit.hang's stall / stopped /
straggler findings. One place, so `cockpit diagnose RUN`, the run summary and the TUI say the same."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from cockpit import contract
from cockpit.hang.words import rank_list, spans
from cockpit.insight.first_failure import first_failure, line_of
from cockpit.run import layout
from cockpit.run.attempts import Attempt
from cockpit.run.findings import LiveFinding
from cockpit.run.handle import Run
from cockpit.run.status import Watch
from cockpit.run.store import RunStatus, rank_files


def diagnose_run(run: Run):
    """The whole diagnosis of a run, hang findings first (raises OSError for an unreadable log), from the
    status.json ``run`` was read with. A sweep's is that of its trial that failed first: its rank logs and exit
    records, not the sweep's torchrun tables (which blame the rank that lost its peer)."""
    from dataclasses import replace

    from cockpit.logs.diagnose.report import diagnose_sources

    trial = first_failed_trial(run)
    if trial is not None:
        return diagnose_run(trial)

    report = run_findings(run, diagnose_sources(run_sources(run.dir), since=attempt_mark(run)))
    return replace(report, findings=(*hang_findings(run), *report.findings, *earlier_attempts(run)))


def attempt_mark(run: Run) -> bytes | None:
    """What a relaunched run's logs are read from (the last attempt's marker: its diagnosis is that of its last
    attempt); None for a run that started once."""
    return contract.ATTEMPT_MARK.encode() if run.status is not None and len(run.status.attempts) > 1 else None


def earlier_attempts(run: Run) -> list:
    """A relaunched run's earlier attempts, each an info finding: how it ended and what cockpit did then (their
    lines are in the run's logs before each attempt marker, their records under logs/attempt-N/)."""
    from cockpit.logs.diagnose.model import Finding

    attempts: list[Attempt] = run.status.attempts if run.status is not None else []
    return [Finding("info", "earlier_attempt", attempt_title(a), a.decision or "", ()) for a in attempts[:-1]]


# How an attempt ended (cockpit.run.attempts.ENDS), in words after "attempt N"
END_WORDS = {"failure": "ended by a failure", "stall": "ended by a stall", "stopped": "was stopped",
             "requeued": "was requeued by Slurm", "succeeded": "succeeded"}


def attempt_title(a: Attempt) -> str:
    """`attempt 0 ended by a failure: rank 1 raised ...`, `attempt 0 was stopped`."""
    words = END_WORDS.get(a.end or "", f"ended ({a.end or 'how is unknown'})")
    return f"attempt {a.attempt} {words}" + (f": {a.cause}" if a.cause else "")


def first_failed_trial(run: Run) -> Run | None:
    """A sweep's failed (or lost) trial that ended first, read once; None for a run that is no sweep, or none
    failed."""
    from cockpit.run.store import is_sweep

    status = run.status
    if status is None or not is_sweep(status):
        return None
    failed = []
    for node in status.nodes:
        if node.trial is None or node.state not in ("failed", "lost"):
            continue
        trial = Run.load(Path(node.run_dir) if node.run_dir else layout.trial_dir(run.dir, node.trial.index))
        ended = trial.status.ended if trial.status and trial.status.ended else float("inf")
        failed.append((ended, node.trial.index, trial))
    return min(failed, key=lambda f: f[:2])[2] if failed else None


def run_sources(run_dir: Path) -> list[tuple[str, str | None, int | None]]:
    """A run's logs with what their names say: per-rank logs (host, rank), then torchrun's (host)."""
    sources: list[tuple[str, str | None, int | None]] = [
        (str(path), host, rank) for rank, (host, path) in sorted(rank_files(run_dir, "log").items())]
    sources += [(str(path), host, None) for host, path in layout.agent_logs(run_dir)]
    return sources


def hang_findings(run: Run) -> list:
    """The run's stall / stopped / straggler findings (cockpit.hang, kept in status.json) as diagnosis
    findings."""
    from cockpit.hang.finding import evidence_of
    from cockpit.logs.diagnose.model import Finding, Severity

    status, run_dir = run.status, run.dir
    if status is None:
        return []
    live = not status.final
    # status.json's severity is read as written (a string; the watchdog writes "error" or "warning")
    found = [Finding(cast(Severity, f.severity), f.kind, f.text,
                     f.hint + (f" (next: {f.next})" if f.next and live else ""), evidence_of(f, run_dir))
             for f in status.findings]
    return found + [Finding("warning", f"{h.kind}_cleared", history_line(h, status.started), _cleared_hint(h),
                            evidence_of(h, run_dir)) for h in status.history]


def history_line(h: LiveFinding, started: float | None) -> str:
    """One stall of the run's history (it cleared): when, how long, and what it was."""
    import time

    began = h.began
    if began is None:
        at = "at ?"
    elif started:
        at = f"{duration(max(0.0, began - started))} after start"
    else:
        at = "at " + time.strftime("%H:%M:%S", time.localtime(began))
    return f"{h.kind} {at}, cleared after {duration(h.lasted_s)}: {h.text}"


def _cleared_hint(h: LiveFinding) -> str:
    who = [c.rank for c in h.culprits]
    hint = (f"the ranks moved again by themselves: a pause (an evaluation, a checkpoint or a slow read on "
            f"{rank_list(who) if who else 'some rank'}), not a hang")
    if h.rule == "adaptive":
        hint += "; without stall_after, the stall threshold now allows 3 x a pause this long"
    return hint


def run_findings(run: Run, report):
    """``report`` (of the run's logs) with what the run's status.json knows: ranks that aborted in teardown
    after their work (cockpit.logs.diagnose.teardown) first; for a stopped run, without the stop's echoes (and, where
    cockpit stopped it because it hung, saying so); the first failure and its cause from the exit records, the
    launcher's exit and the ranks' places when they ended (cockpit.insight.cause); torchrun's own restarts
    (max_restarts)."""
    from dataclasses import replace

    from cockpit.logs.diagnose import teardown

    status, run_dir = run.status, run.dir
    if status is None:
        return report
    findings = teardown.without_stop(report.findings, status.first_failure is not None) \
        if status.state == "stopped" else report.findings
    findings = _stopped_by_cockpit(run_dir, status, findings)
    # cockpit's own rank wrapper: bash's report of its rank's death by signal, which the exit records tell better
    findings = tuple(f for f in findings if not (f.code == "process_died" and "/rank-wrapper." in f.title))
    logs = rank_files(run_dir, "log")
    findings, cause = first_failure(findings, status, logs, report, run_dir)
    if any(f.code == "first_failure" for f in findings):
        findings = tuple(f for f in findings if f.code != "uncaught_exception")
    aborted = []
    for rank, rec in sorted(status.ranks.items(), key=lambda kv: int(kv[0])):
        if rec.teardown_abort and int(rank) in logs:
            path = logs[int(rank)][1]
            aborted.append(teardown.teardown_finding(int(rank), ((str(path), line_of(path, teardown.ABORT_LINE)),)))
    from cockpit.insight.restarted import restarted_over, torchrun_restarts

    return replace(report, findings=(*_unsubmitted(status), *aborted, *restarted_over(status, findings),
                                     *torchrun_restarts(status)), cause=cause or report.cause)


def _unsubmitted(status: RunStatus) -> tuple:
    """A run that never reached its scheduler (sbatch refused it, or cockpit ended while sbatch waited): no log
    says so, since nothing ran; its status.json's note does."""
    from cockpit.logs.diagnose.model import Finding

    if status.state != "unsubmitted":
        return ()
    why = (status.note or "no reason recorded").removeprefix("not submitted: ")
    return (Finding("error", "unsubmitted", f"the run was never submitted: {why}",
                    f"Nothing of it ran. Run the job again (cockpit run {status.job_file}); where sbatch may have "
                    f"reached the controller, look first: squeue --me --name {status.name}.", ()),)


def _stopped_by_cockpit(run_dir: Path, status: RunStatus, findings: tuple) -> tuple:
    """A run cockpit stopped itself because it hung (on_stall: stop): its stop finding says so, not "a stop was
    requested ... look for scancel"."""
    from dataclasses import replace

    from cockpit.run.store import stop_request

    if not status.stop_requested or not str(stop_request(run_dir).get("by", "")).startswith("cockpit: on_stall"):
        return findings
    stall = next((f for f in status.findings if f.kind == "stall"), None)
    title = "cockpit stopped the run: it hung (on_stall: stop)" + (f": {stall.text}" if stall else "")
    hint = ("The stall finding says which rank was stuck where; the ranks' SIGTERM exits and the launcher's stop "
            "messages follow from cockpit's stop. To keep a hung run for inspection, use on_stall: report.")
    return tuple(replace(f, title=title, hint=hint) if f.code == "stop_requested" else f for f in findings)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def health(s: RunStatus, frozen: tuple[int, str] | None = None) -> str:
    """The ps HEALTH column: what cockpit.hang's watchdog says of a run's ranks; first, a supervisor that is
    ``frozen`` (pid, state T or D: cockpit.launch.control.frozen_supervisor), which watches nothing."""
    if frozen is not None and not s.final:
        return f"frozen: supervisor pid {frozen[0]} state {frozen[1]}"
    words = []
    for f in s.findings:
        if f.kind == "straggler":
            words.append(f"straggler:{f.rank}")
        elif f.kind == "stopped":
            words.append("stopped:" + spans([c.rank for c in f.culprits if c.state != "running"], ","))
        else:
            culprits = [c.rank for c in f.culprits]
            words.append(f"stalled {duration(f.quiet_s)}" + (
                f" (rank{'s' if len(culprits) > 1 else ''} {spans(culprits, ',')})" if culprits else ""))
    if words:
        return "; ".join(words)
    watch: Watch = s.watch or {}
    if s.state == "running" and watch.get("starting"):
        return "starting" + (f" {duration(watch['starting_s'])}" if watch.get("starting_s") is not None else "")
    if s.history:
        return ("ok" if s.state == "running" and s.progress else "-") + f" ({len(s.history)} cleared)"
    return "ok" if s.state == "running" and s.progress else "-"
