"""A run's diagnosis: its logs (cockpit.logs) with what its status.json knows — the first failure to the
nanosecond, ranks that aborted in teardown, a stop's echoes left out, and cockpit.hang's stall / stopped /
straggler findings. One place, so `cockpit diagnose RUN`, the run summary and the TUI say the same."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from cockpit import contract
from cockpit.hang.words import rank_list, spans
from cockpit.run import layout
from cockpit.run.attempts import Attempt
from cockpit.run.findings import LiveFinding
from cockpit.run.handle import Run
from cockpit.run.records import FirstFailure
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
    return [Finding("info", "earlier_attempt", f"attempt {a.attempt} ended by {a.end or 'unknown'}"
                    + (f": {a.cause}" if a.cause else ""), a.decision or "", ())
            for a in attempts[:-1]]


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
    findings, cause = _first_failure(findings, status, logs, report, run_dir)
    if any(f.code == "first_failure" for f in findings):
        findings = tuple(f for f in findings if f.code != "uncaught_exception")
    aborted = []
    for rank, rec in sorted(status.ranks.items(), key=lambda kv: int(kv[0])):
        if rec.teardown_abort and int(rank) in logs:
            path = logs[int(rank)][1]
            aborted.append(teardown.teardown_finding(int(rank), ((str(path), _line_of(path, teardown.ABORT_LINE)),)))
    from cockpit.insight.restarted import restarted_over, torchrun_restarts

    return replace(report, findings=(*aborted, *restarted_over(status, findings), *torchrun_restarts(status)),
                   cause=cause or report.cause)


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


def _places(logs: dict) -> dict:
    """Each rank's place when it ended (cockpit.insight.cause.place_of), for the ranks that left one."""
    from cockpit.insight.cause import place_of
    from cockpit.run.store import tail_lines

    out = {}
    for rank, (_host, path) in logs.items():
        try:
            stacks = Path(str(path)[:-len(".log")] + ".stacks").read_text(encoding="utf-8", errors="replace")
        except OSError:
            stacks = ""
        place = place_of(stacks[-200_000:], tail_lines(path, 200))
        if place is not None:
            out[rank] = place
    return out


def _first_failure(findings: tuple, status: RunStatus, logs: dict, report,
                   run_dir: Path) -> tuple[tuple, object]:
    """The first-failure finding and the run's root cause (cockpit.logs.diagnose.model.Cause) from the exit
    records: the launcher's own death, an early exit, a mismatch gloo aborted, else the first failing rank with
    its own log's words. The exit records (to the nanosecond) say it better than torchelastic's table (1-second
    timestamps, the lowest rank on a tie) or the logs' order: where a run has them, their finding replaces the
    logs'."""
    from cockpit.insight.cause import LAUNCHER_HINT, launcher_death, oom_kill
    from cockpit.logs.diagnose.model import MAX_EVIDENCE, Cause, Finding
    from cockpit.logs.parse.kinds import HOST_OOM

    others = tuple(f for f in findings if f.code != "first_failure")
    death = launcher_death(status)
    if death is not None:
        host, how = death
        ended = rank_list([int(r) for r in status.ranks])
        title = f"First failure: the launcher (torchrun on {host}) was {how}; {ended} were ended with it"
        cause = Cause(f"the launcher (torchrun on {host}) was {how}", None, host, "launcher", "outside")
        return (Finding("error", "first_failure", title, LAUNCHER_HINT, ()), *others), cause
    first = status.first_failure
    if first is None or first.rank is None:
        return findings, None
    oom = oom_kill(run_dir, first)
    if oom is not None:  # the node's OOM-kill count rose as the rank died of SIGKILL: its log cannot say more
        words, hint, files = oom
        evidence = tuple((str(path), _line_count(path)) for path in files[:MAX_EVIDENCE])
        title = f"First failure (exit records): rank {first.rank} on {first.host}: {first.description}: {words}"
        return ((Finding("error", "first_failure", title, hint, evidence), *others),
                Cause(words, first.rank, first.host, HOST_OOM, "resources", evidence))
    places = _places(logs)
    if first.status == 0 or (first.teardown_abort and _peers_lost(status, logs, first.rank)):
        return _early_exit(others, status, first, logs, places)  # a rank that ended its work while others waited
    return _failed_rank(findings, first, logs, report, places)


def _peers_lost(status: RunStatus, logs: dict, rank: int) -> bool:
    """Whether every other failed rank's log says it lost its peer (cockpit.logs.diagnose.peerloss)."""
    from cockpit.logs.diagnose.peerloss import lost_a_peer
    from cockpit.run.store import tail_lines

    others = [int(r) for r, e in status.ranks.items() if e.status != 0 and int(r) != rank]
    return bool(others) and all(r in logs and lost_a_peer(tail_lines(logs[r][1], 40)) for r in others)


def _early_exit(others: tuple, status: RunStatus, first: FirstFailure, logs: dict,
                places: dict) -> tuple[tuple, object]:
    from cockpit.logs.diagnose.model import Cause, Finding
    from cockpit.logs.diagnose.peerloss import EARLY_EXIT_HINT

    rank = first.rank
    victims = sorted(int(r) for r, e in status.ranks.items() if e.status != 0 and int(r) != rank)
    from cockpit.insight.cause import places_said

    waited = places_said([v for v in victims if v in places], places, "was", "were")
    title = f"First failure (exit records): rank {rank} on {first.host}: {first.description}"
    who = rank_list(victims) if victims else "the others"
    ended = "exited with code 0" if first.status == 0 else "ended its script (then aborted in teardown)"
    words = f"rank {rank} {ended} while {who} still waited " \
            f"for it in a collective" + (f" ({waited})" if waited else "")
    log = logs.get(rank)
    evidence = ((str(log[1]), _line_count(log[1])),) if log else ()
    cause = Cause(words, rank, first.host, "early_exit", "code", evidence)
    hint = f"An early exit: {words}. Fix: {EARLY_EXIT_HINT}."
    return (Finding("error", "first_failure", title + (f"; {waited}" if waited else ""), hint, evidence),
            *others), cause


def _failed_rank(findings: tuple, first, logs: dict, report, places: dict) -> tuple[tuple, object]:
    from cockpit.insight.cause import mismatch, read_source
    from cockpit.logs.diagnose.cause import cause_of, is_root
    from cockpit.logs.diagnose.model import Cause, Finding
    from cockpit.logs.parse.kinds import COLLECTIVE_MISMATCH

    rank = first.rank
    log = logs.get(rank)
    own = [(f.path, e) for f in report.files for e in f.events
           if log is not None and Path(f.path) == log[1] and is_root(e)]
    aborted = {r: e.text for f in report.files for e in f.events if e.kind == COLLECTIVE_MISMATCH
               for r, (_h, p) in logs.items() if Path(f.path) == p}
    found = mismatch(places, aborted, read_source) if aborted else None
    named = [f for f in findings if f.code == "first_failure"]
    if found is not None:
        ev = next(((p, e.line) for p, e in own if e.kind == COLLECTIVE_MISMATCH), None)
        cause = Cause(found.words, found.uneven if found.uneven is not None else rank, first.host,
                      "uneven_inputs" if found.uneven is not None else COLLECTIVE_MISMATCH, "code",
                      (ev,) if ev else ())
        mine = Finding("error", "first_failure", f"First failure (exit records): rank {rank} on {first.host}: "
                       f"{first.description}: {found.words}", found.hint, (ev,) if ev else ())
        code = "uneven_inputs" if found.uneven is not None else COLLECTIVE_MISMATCH
        rest = [f for f in findings if f.code not in ("first_failure", COLLECTIVE_MISMATCH)]
        detail = Finding("error", code, found.title, found.hint, (ev,) if ev else ())
        return (mine, detail, *rest), cause
    cause = cause_of(*own[0]) if own else Cause(f"rank {rank} was {first.description}", rank, first.host,
                                                 "signal" if first.signal else "exit", "unknown")
    if not named and (log is None or first.description.startswith("killed by SIGTERM")):
        return findings, cause  # no agent table (a script that spawns its ranks, Slurm): name a rank with a log
    evidence = ((str(log[1]), _line_of(log[1], "Traceback")),) if log else ()
    hint = named[0].hint if named else ("the other ranks' errors follow from this one: read its log from the "
                                        "evidence line and fix it first")
    said = _exception_of(report, log[1]) if log and report is not None else None
    mine = Finding("error", "first_failure", f"First failure (exit records): rank {rank} on {first.host}: "
                   f"{first.description}" + (f": {said}" if said else ""), hint, evidence)
    return (mine, *(f for f in findings if f.code != "first_failure")), cause


def _exception_of(report, path: Path) -> str | None:
    """The last line of the first Python exception in ``path`` as the report parsed it, in its own words (one a
    kind names, such as no_gpu's "RuntimeError: Distributed package doesn't have NCCL built in", included)."""
    from cockpit.logs.diagnose.cause import exception_words
    from cockpit.logs.parse.ends import is_exception_line
    from cockpit.logs.parse.kinds import NO_GPU, PYTHON_EXCEPTION

    for f in report.files:
        if Path(f.path) == path:
            e = next((e for e in f.events if e.kind == PYTHON_EXCEPTION
                      or (e.kind == NO_GPU and is_exception_line(e.text))), None)
            if e is not None:
                return exception_words(e.text)
    return None


def _line_count(path: Path) -> int:
    """The number of the log's last line (1 for an empty or unreadable log)."""
    try:
        with open(path, "rb") as f:
            return max(sum(1 for _ in f), 1)
    except OSError:
        return 1


def _line_of(path: Path, text: str) -> int:
    """The line number of the last line holding ``text`` (1 when none)."""
    from cockpit.logs.diagnose.report import read_lines

    found = 1
    try:
        for n, line in enumerate(read_lines(path, follow=False), 1):  # bounded, regular files only
            if text in line:
                found = n
    except OSError:
        return found
    return found


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
