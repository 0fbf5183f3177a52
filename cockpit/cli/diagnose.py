"""`cockpit diagnose PATH|RUN … [--json]`: what broke, where, and what to try, from log files or a run.

Exit codes: 0 no error findings, 1 at least one error finding, 2 bad input."""

from __future__ import annotations

import sys
from pathlib import Path

from cockpit import run_layout as layout
from cockpit.paths import default_runs_dir
from cockpit.rundiag import hang_findings, run_findings, run_sources
from cockpit.runs import RunNotFound, resolve_run


class DiagnoseInputError(Exception):
    pass


def sources_for(arg: str, runs_dir: Path) -> list[tuple[str, str | None, int | None]]:
    path = Path(arg)
    if path.is_file():
        return [(arg, None, None)]
    if path.is_dir() and not (path / layout.STATUS).exists():
        raise DiagnoseInputError(f"{arg}: a directory, not a log file or a run directory "
                                 "(hint: give the log files, e.g. logs/*.log)")
    try:
        return run_sources(resolve_run(runs_dir, arg))
    except RunNotFound:
        raise DiagnoseInputError(f"{arg}: no such log file or run (hint: cockpit ps lists runs)") from None


def cmd_diagnose(args) -> int:
    from cockpit.cli.console import use_color
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
