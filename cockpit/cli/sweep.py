"""`cockpit sweep show | rerun`: a sweep's trial table (state, steps, last loss, forecast; sortable by loss)
and the rerun of its failed trials (cockpit.launch.rerun) as a new run, followed like `cockpit run`."""

from __future__ import annotations

import argparse
import json
import time

from cockpit.cli.common import UsageError, grace_seconds


def add_sweep_commands(sub) -> None:
    p = sub.add_parser("sweep", help="a sweep's trials: show them (sortable by loss), rerun the failed ones")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    v = verbs.add_parser("show", help="each trial's arguments, state, steps, last loss and forecast")
    v.add_argument("run", metavar="RUN")
    v.add_argument("--sort", choices=("trial", "loss", "state", "steps"), default="trial",
                   help="order of the rows (loss: lowest first, trials without one last)")
    v.add_argument("--json", action="store_true", help="one JSON object: the sweep and its trials")
    v.add_argument("--runs-dir")
    v.set_defaults(func=_call("show"))
    v = verbs.add_parser("rerun", help="run the failed trials again, same arguments, as a new run")
    v.add_argument("run", metavar="RUN")
    v.add_argument("--failed", action="store_true", required=True,
                   help="the failed (and lost) trials: the only selection there is for now")
    v.add_argument("--grace", type=grace_seconds, default=10.0, metavar="S",
                   help="seconds between SIGTERM and SIGKILL on stop")
    v.add_argument("--detach", action="store_true", help="start it and return; cockpit attach follows it")
    v.add_argument("--rank", type=int, action="append", help=argparse.SUPPRESS)
    v.add_argument("--host", action="append", help=argparse.SUPPRESS)
    v.add_argument("--quiet", "-q", action="store_true", help="no log lines, only the summary")
    v.add_argument("--runs-dir")
    v.set_defaults(func=_call("rerun"))


def _call(verb: str):
    def call(args: argparse.Namespace) -> int:
        from cockpit.cli import runs as cli_runs

        try:
            return cmd_show(args) if verb == "show" else cmd_rerun(args)
        except cli_runs.CommandError as exc:
            raise UsageError(str(exc)) from None
    return call


def cmd_show(args) -> int:
    from cockpit.cli.runs import CommandError, find, status_of
    from cockpit.insight.forecast import hms
    from cockpit.insight.sweep_table import sort_rows, sweep_gpu_hours, table, trial_rows
    from cockpit.launch.rerun import rerun_of
    from cockpit.run.store import is_sweep

    run_dir = find(args)
    status = status_of(run_dir)
    if not is_sweep(status):
        raise CommandError(f"{status.run_id} is not a sweep (hint: cockpit ps shows it; sweeps list trials)")
    rows = sort_rows(trial_rows(run_dir, status), args.sort)
    hours = sweep_gpu_hours(rows)
    if args.json:
        print(json.dumps({"run": status.run_id, "state": status.state, "note": status.note,
                          "rerun_of": rerun_of(run_dir),
                          "gpu_hours": hours, "trials": [r.to_dict() for r in rows]}, indent=2))
        return 0
    took = hms((status.ended or time.time()) - (status.started or status.created))
    gpus = "CPU-only" if rows and all(r.forecast.gpus == 0 for r in rows) else (
        f"{hours:.2f} GPU-h" if hours is not None else "? GPU-h")
    trials = f"{len(rows)} trial{'s' if len(rows) != 1 else ''}"
    print(f"== {status.name} ({status.run_id}): {status.state}, {trials}, {took}, {gpus} ==")
    if (which := rerun_of(run_dir)) is not None:
        print(which)
    print(table(rows))
    if status.note:
        print(f"note: {status.note}")
    return 0


def cmd_rerun(args) -> int:
    from cockpit.cli.follow import follow
    from cockpit.cli.notices import notice
    from cockpit.cli.runs import CommandError, find, status_of
    from cockpit.launch.rerun import rerun_failed, rerun_of
    from cockpit.launch.site import LaunchError

    run_dir = find(args)
    status = status_of(run_dir)
    try:
        new_dir = rerun_failed(run_dir, status, grace=args.grace)
    except LaunchError as exc:
        raise CommandError(str(exc)) from None
    notice(f"run {new_dir.name} started: {rerun_of(new_dir)}; run directory {new_dir}")
    if args.detach:
        print(new_dir.name)
        return 0
    return follow(new_dir, args, skip_existing=False, owner=True)
