"""`cockpit diagnose PATH|RUN|JOBID … [--json]`: what broke, where, and what to try, from log files, a run, or
any Slurm job of the user (the files its batch script wrote).

Exit codes: 0 no error findings, 1 at least one error finding, 2 bad input. With ``--fix`` / ``--apply`` (one
run): see ``diagnose_fix``."""

from __future__ import annotations

import sys
from pathlib import Path

from cockpit.fs.paths import default_runs_dir, too_long
from cockpit.insight.diagnosis import attempt_mark, earlier_attempts, hang_findings, run_findings, run_sources
from cockpit.run import layout
from cockpit.run.handle import Run
from cockpit.run.store import RunNotFound, resolve_run
from cockpit.slurm.jobs import parse_job_ref


class DiagnoseInputError(Exception):
    pass


def run_of(arg: str, runs_dir: Path) -> Path | None:
    """The run ``arg`` names: a run reference, or a Slurm job id a cockpit run submitted; None otherwise."""
    from cockpit.cli.targets import job_target

    if Path(arg).is_file():
        return None
    job_id, run_dir = job_target(arg, runs_dir)
    if job_id is not None:
        return run_dir
    from cockpit.insight.diagnosis import first_failed_trial
    from cockpit.run.handle import Run

    try:
        run_dir = resolve_run(runs_dir, arg)
    except RunNotFound:
        return None
    trial = first_failed_trial(Run.load(run_dir))  # a sweep: its trial that failed first
    return trial.dir if trial is not None else run_dir


def sources_for(arg: str, runs_dir: Path) -> list[tuple[str, str | None, int | None]]:
    path = Path(arg)
    if path.is_file():
        return [(arg, None, None)]
    if (run_dir := run_of(arg, runs_dir)) is not None:
        return run_sources(run_dir)
    if (job_id := parse_job_ref(arg)) is not None:  # any Slurm job: the files its batch script wrote
        from cockpit.cli.jobs import JobError, sources

        try:
            return sources(job_id)
        except JobError as exc:
            raise DiagnoseInputError(str(exc)) from None
    if path.is_dir() and not (path / layout.STATUS).exists():
        raise DiagnoseInputError(f"{arg}: a directory, not a log file or a run directory "
                                 "(hint: give the log files, e.g. logs/*.log)")
    try:
        return run_sources(resolve_run(runs_dir, arg))
    except RunNotFound:
        raise DiagnoseInputError(f"{arg}: no such log file or run (hint: cockpit ps lists runs)") from None


def _worked_out(runs: list) -> list:
    """``runs`` with those still `starting` without a supervisor worked out again from what their directory and
    this host hold (no scheduler is asked: that is `ps`'s survey): a run left so by a cockpit killed before it
    started its supervisor, or before sbatch answered, is diagnosed as what it is (its launcher's ``recover``)."""
    from cockpit.cli.common import notice
    from cockpit.launch import registry
    from cockpit.run.trust import owner

    return [Run(r.dir, registry.for_run(r.status, fallback="local").recover(r.dir, r.status, None, notice))
            if r.status is not None and r.status.state == "starting" and r.status.supervisor is None
            and owner(r.dir) is None else r for r in runs]


def cmd_diagnose(args) -> int:
    from cockpit.cli.console import use_color
    from cockpit.logs.diagnose.report import diagnose_sources, render_json, render_text

    runs_dir = Path(args.runs_dir) if args.runs_dir else default_runs_dir()
    for arg in args.inputs:  # asked before the file system, which answers a name too long with an OSError
        if (why := too_long(arg)) is not None:
            raise DiagnoseInputError(f"{arg[:40]}...: not a log file, run or Slurm job: {why} (hint: cockpit ps "
                                     "lists runs)")
    fixing = getattr(args, "fix", False) or getattr(args, "apply", False)
    if fixing and (len(args.inputs) != 1 or args.json or run_of(args.inputs[0], runs_dir) is None):
        raise DiagnoseInputError("--fix / --apply take one run (a run id or directory) and no --json "
                                 "(hint: cockpit ps lists runs)")
    sources = [s for arg in args.inputs for s in sources_for(arg, runs_dir)]
    named = [arg for arg in args.inputs if Path(arg).is_file()]  # files named here may be links; a run's are not
    try:
        runs = [Run.load(d) for arg in args.inputs if (d := run_of(arg, runs_dir)) is not None]  # read once
        runs = _worked_out(runs)
        # a relaunched run: the diagnosis of its last attempt (each log from the last attempt's marker)
        since = next((mark for run in runs if (mark := attempt_mark(run)) is not None), None)
        report = diagnose_sources(sources, follow=set(named), since=since)
        hang = [f for run in runs for f in hang_findings(run)]
        for run in runs:
            report = run_findings(run, report)
        earlier = [f for run in runs for f in earlier_attempts(run)]
    except OSError as exc:
        raise DiagnoseInputError(f"{exc.filename}: {exc.strerror}") from None
    if hang or earlier:
        from dataclasses import replace

        report = replace(report, findings=(*hang, *report.findings, *earlier))
    if fixing:
        from cockpit.cli.diagnose_fix import cmd_fix
        from cockpit.run.trust import own_run

        if args.apply:  # the job file its status.json names is another user's to fix
            own_run(runs[0].dir, "diagnose --fix --apply", "write a fixed job file for")

        return cmd_fix(runs[0], report, args.apply, DiagnoseInputError)
    if args.json:
        text = render_json(report)
        # "kind": the link's own (dead_link, slow_link, unreachable); "finding": the finding it explains
        links = [{"run": r.status.run_id, "finding": f.kind, **f.link} for r in runs if r.status
                 for f in (*r.status.findings, *r.status.history) if f.link]
        conns = [{"run": r.status.run_id, "kind": f.kind, **f.connections} for r in runs if r.status
                 for f in (*r.status.findings, *r.status.history) if f.connections]
        ras = [{"run": c["run"], "kind": c["kind"], **r} for c in conns for r in c.get("ras") or ()]
        if links or conns:  # link findings with their tables (linkwords.link_dict); every connection gathered
            import json

            # "ras": NCCL's RAS answer per node, gathered with the stacks (cockpit.hang.raswords.ras_json)
            more = {k: v for k, v in (("links", links), ("connections", conns), ("ras", ras)) if v}
            text = json.dumps({**json.loads(text), **more}, indent=2, ensure_ascii=False)
        print(text)
    else:
        print(render_text(report, color=use_color(sys.stdout)))
    return 1 if any(f.severity == "error" for f in report.findings) else 0
