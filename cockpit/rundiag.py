"""A run's diagnosis: its logs (cockpit.logs) with what its status.json knows — the first failure to the
nanosecond, ranks that aborted in teardown, a stop's echoes left out, and cockpit.hang's stall / stopped /
straggler findings. One place, so `cockpit diagnose RUN`, the run summary and the TUI say the same."""

from __future__ import annotations

import re
from pathlib import Path

from cockpit import run_layout as layout
from cockpit.runs import FirstFailure, RunStatus, rank_files


def diagnose_run(run_dir: Path):
    """The whole diagnosis of a run directory, hang findings first (raises OSError for an unreadable log).
    A sweep's is that of its trial that failed first: its rank logs and exit records, not the sweep's
    torchrun tables (which blame the rank that lost its peer)."""
    from dataclasses import replace

    from cockpit.logs.report import diagnose_sources

    trial = first_failed_trial(run_dir)
    if trial is not None:
        return diagnose_run(trial)

    report = run_findings(run_dir, diagnose_sources(run_sources(run_dir)))
    return replace(report, findings=(*hang_findings(run_dir), *report.findings))


def first_failed_trial(run_dir: Path) -> Path | None:
    """A sweep's failed (or lost) trial that ended first; None for a run that is no sweep, or none failed."""
    from cockpit.runs import is_sweep, read_status

    status = read_status(run_dir)
    if status is None or not is_sweep(status):
        return None
    failed = []
    for node in status.nodes:
        if node.trial is None or node.state not in ("failed", "lost"):
            continue
        tdir = Path(node.run_dir) if node.run_dir else layout.trial_dir(run_dir, node.trial.index)
        trial = read_status(tdir)
        failed.append((trial.ended if trial and trial.ended else float("inf"), node.trial.index, tdir))
    return min(failed)[2] if failed else None


def run_sources(run_dir: Path) -> list[tuple[str, str | None, int | None]]:
    """A run's logs with what their names say: per-rank logs (host, rank), then torchrun's (host)."""
    sources: list[tuple[str, str | None, int | None]] = [
        (str(path), host, rank) for rank, (host, path) in sorted(rank_files(run_dir, "log").items())]
    sources += [(str(path), host, None) for host, path in layout.agent_logs(run_dir)]
    return sources


def hang_findings(run_dir: Path) -> list:
    """The run's stall / stopped / straggler findings (cockpit.hang, kept in status.json) as diagnosis
    findings."""
    from cockpit.hang.finding import evidence_of
    from cockpit.logs.diagnose_model import Finding
    from cockpit.runs import read_status

    status = read_status(run_dir)
    live = status is not None and not status.final
    return [Finding(f["severity"], f["kind"], f["text"],
                    f["hint"] + (f" (next: {f['next']})" if f.get("next") and live else ""), evidence_of(f, run_dir))
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
    findings = _exact_first_failure(findings, status.first_failure, logs, report)
    aborted = []
    for rank, rec in sorted(status.ranks.items(), key=lambda kv: int(kv[0])):
        if rec.teardown_abort and int(rank) in logs:
            path = logs[int(rank)][1]
            aborted.append(teardown.teardown_finding(int(rank), ((str(path), _line_of(path, teardown.ABORT_LINE)),)))
    return replace(report, findings=(*aborted, *findings))


def _exact_first_failure(findings: tuple, first: FirstFailure | None, logs: dict, report=None) -> tuple:
    """torchelastic names its root cause by 1-second timestamps, the lowest rank on a tie: where it names
    another rank than the exit records (to the nanosecond) do, the exit records' rank is the first failure."""
    from cockpit.logs.diagnose_model import Finding

    if first is None or first.rank is None:
        return findings
    rank = first.rank
    named = [f for f in findings if f.code == "first_failure"]
    if named and all(re.search(rf"\brank {rank}\b", f.title) for f in named):
        return findings
    log = logs.get(rank)
    if not named and (log is None or first.description.startswith("killed by SIGTERM")):
        return findings  # no agent table (a script that spawns its ranks, Slurm): name a rank with a log
    evidence = ((str(log[1]), _line_of(log[1], "Traceback")),) if log else ()
    hint = named[0].hint if named else ("the other ranks' errors follow from this one: read its log from the "
                                        "evidence line and fix it first")
    said = _exception_of(report, log[1]) if log and report is not None else None
    mine = Finding("error", "first_failure", f"First failure (exit records): rank {rank} on {first.host}: "
                   f"{first.description}" + (f": {said}" if said else ""), hint, evidence)
    return (mine, *(f for f in findings if f.code != "first_failure"))


def _exception_of(report, path: Path) -> str | None:
    """The last line of the first Python exception in ``path`` as the report parsed it, in its own words."""
    from cockpit.logs.parse_kinds import PYTHON_EXCEPTION

    for f in report.files:
        if Path(f.path) == path:
            e = next((e for e in f.events if e.kind == PYTHON_EXCEPTION), None)
            if e is not None:
                words = re.sub(r"^\[[^\]]{0,40}\]:? ?", "", " ".join(e.text.split()))  # a "[rank1]: " prefix
                return words if len(words) <= 120 else words[:119] + "…"
    return None


def _line_of(path: Path, text: str) -> int:
    """The line number of the last line holding ``text`` (1 when none)."""
    from cockpit.logs.report import read_lines

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
        if f["kind"] == "straggler":
            words.append(f"straggler:{f['rank']}")
        elif f["kind"] == "stopped":
            words.append("stopped:" + ",".join(str(c["rank"]) for c in f["culprits"] if c["state"] != "running"))
        else:
            culprits = ",".join(str(c["rank"]) for c in f["culprits"])
            words.append(f"stalled {duration(f['quiet_s'])}" + (f" (rank {culprits})" if culprits else ""))
    if words:
        return "; ".join(words)
    return "ok" if s.state == "running" and s.progress else "-"
