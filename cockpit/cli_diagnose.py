"""`cockpit diagnose PATH|RUN … [--json]`: what broke, where, and what to try, from log files or a run.

Exit codes: 0 no error findings, 1 at least one error finding, 2 bad input."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from cockpit.paths import default_runs_dir
from cockpit.runs import RunNotFound, rank_files, resolve_run


class DiagnoseInputError(Exception):
    pass


def run_sources(run_dir: Path) -> list[tuple[str, str | None, int | None]]:
    """A run's logs with what their names say: per-rank logs (host, rank), then torchrun's (host)."""
    sources: list[tuple[str, str | None, int | None]] = [
        (str(path), host, rank) for rank, (host, path) in sorted(rank_files(run_dir, "log").items())]
    for path in sorted((run_dir / "logs").glob("agent.*.log")):
        sources.append((str(path), path.name[len("agent."):-len(".log")], None))
    return sources


def hang_findings(run_dir: Path) -> list:
    """The run's stall / stopped / straggler findings (cockpit.hang, kept in status.json) as diagnosis
    findings."""
    from cockpit.hang.finding import evidence_of
    from cockpit.logs.diagnose_model import Finding
    from cockpit.runs import read_status

    status = read_status(run_dir)
    return [Finding(f["severity"], f["kind"], f["text"], f["hint"], evidence_of(f, run_dir))
            for f in (status.findings if status else ())]


def run_findings(run_dir: Path, report):
    """``report`` (of the run's logs) with what the run's status.json knows: ranks that aborted in teardown
    after their work (cockpit.logs.teardown) first, and, for a stopped run, without the stop's echoes."""
    from dataclasses import replace

    from cockpit.logs import teardown
    from cockpit.runs import read_status

    status = read_status(run_dir)
    if status is None:
        return report
    findings = teardown.without_stop(report.findings, status.first_failure is not None) \
        if status.state == "stopped" else report.findings
    logs = rank_files(run_dir, "log")
    findings = _exact_first_failure(findings, status.first_failure, logs)
    aborted = []
    for rank, rec in sorted(status.ranks.items(), key=lambda kv: int(kv[0])):
        if rec.get("teardown_abort") and int(rank) in logs:
            path = logs[int(rank)][1]
            aborted.append(teardown.teardown_finding(int(rank), ((str(path), _line_of(path, teardown.ABORT_LINE)),)))
    return replace(report, findings=(*aborted, *findings))


def _exact_first_failure(findings: tuple, first: dict | None, logs: dict) -> tuple:
    """torchelastic names its root cause by 1-second timestamps, the lowest rank on a tie: where it names
    another rank than the exit records (to the nanosecond) do, the exit records' rank is the first failure."""
    from cockpit.logs.diagnose_model import Finding

    if not first or first.get("rank") is None:
        return findings
    rank = first["rank"]
    named = [f for f in findings if f.code == "first_failure"]
    if not named or all(re.search(rf"\brank {rank}\b", f.title) for f in named):
        return findings
    log = logs.get(rank)
    evidence = ((str(log[1]), _line_of(log[1], "Traceback")),) if log else ()
    mine = Finding("error", "first_failure", f"First failure (exit records): rank {rank} on {first['host']}: "
                   f"{first['describe']}", named[0].hint, evidence)
    return (mine, *(f for f in findings if f.code != "first_failure"))


def _line_of(path: Path, text: str) -> int:
    """The line number of the last line holding ``text`` (1 when none)."""
    found = 1
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if text in line:
                found = n
    return found


def sources_for(arg: str, runs_dir: Path) -> list[tuple[str, str | None, int | None]]:
    path = Path(arg)
    if path.is_file():
        return [(arg, None, None)]
    if path.is_dir() and not (path / "status.json").exists():
        raise DiagnoseInputError(f"{arg}: a directory, not a log file or a run directory "
                                 "(hint: give the log files, e.g. logs/*.log)")
    try:
        return run_sources(resolve_run(runs_dir, arg))
    except RunNotFound:
        raise DiagnoseInputError(f"{arg}: no such log file or run (hint: cockpit ps lists runs)") from None


def cmd_diagnose(args) -> int:
    from cockpit.console import use_color
    from cockpit.logs.report import diagnose_sources, render_json, render_text

    runs_dir = Path(args.runs_dir) if args.runs_dir else default_runs_dir()
    sources = [s for arg in args.inputs for s in sources_for(arg, runs_dir)]
    try:
        report = diagnose_sources(sources)
        runs = [resolve_run(runs_dir, arg) for arg in args.inputs if not Path(arg).is_file()]
        hang = [f for run_dir in runs for f in hang_findings(run_dir)]
        for run_dir in runs:
            report = run_findings(run_dir, report)
    except OSError as exc:
        raise DiagnoseInputError(f"{exc.filename}: {exc.strerror}") from None
    if hang:
        from dataclasses import replace

        report = replace(report, findings=(*hang, *report.findings))
    if args.json:
        print(render_json(report))
    else:
        print(render_text(report, color=use_color(sys.stdout)))
    return 1 if any(f.severity == "error" for f in report.findings) else 0
