"""`cockpit ps`: the runs of a runs directory, one row each; ``--json``: every run's status and forecast.

Finished runs are listed from their summaries (cockpit.insight.listing), so listing thousands of them costs about
what reading their status files does. The launchers (to work out a run whose supervisor died, to ask whether a
supervisor is frozen) and the job parser (a forecast worked out now) are imported only for a run that needs
them: one still going, or one without a summary. ``--json`` prints one run at a time, reading each whole status
as it goes, so its memory does not grow with the number of runs.
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path

from cockpit.cli.common import UsageError, notice
from cockpit.cli.ps_filter import RunFilter
from cockpit.fs.paths import default_runs_dir
from cockpit.insight.listing import Listed, list_listed, printed
from cockpit.run.store import UNREADABLE
from cockpit.run.trust import owner


def cmd_ps(args) -> int:
    runs_dir = Path(args.runs_dir) if getattr(args, "runs_dir", None) else default_runs_dir()
    if getattr(args, "all", False):
        if RunFilter.from_args(args).active:
            raise UsageError("ps --all lists Slurm's jobs unfiltered: --state/--name/--since/--last filter cockpit's "
                             "runs only (hint: drop --all, or use squeue -t STATE -n NAME for Slurm jobs)")
        from cockpit.cli.jobs_table import ps_all
        from cockpit.run.store import list_runs

        return ps_all(refresh(list_runs(runs_dir)), args.json)
    wanted = RunFilter.from_args(args)  # (cockpit.cli.ps_filter)
    listed = listing(runs_dir, wanted, rows=not args.json or wanted.needs_rows)
    if args.json:
        print_json(listed)
    elif listed:
        from cockpit.cli.console import table_of

        print(table_of((item.run_dir, item.status, item.forecast) for item in listed if item.status is not None))
    elif wanted.active:
        notice(f"no runs in {runs_dir} match {wanted.said() or 'the filters'} (cockpit ps lists them all)")
    else:
        notice(f"no runs in {runs_dir} (start one: cockpit run jobs/demo.yaml)")
    return 0


def listing(runs_dir: Path, wanted: RunFilter, rows: bool) -> list[Listed]:
    """The runs ``wanted`` keeps, the ones still going worked out again; listed with the cyclic garbage collector
    paused: a listing makes thousands of records, none in a cycle, that each collection would walk again (a tenth
    of `cockpit ps`'s CPU at 5,000 runs)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return wanted.late(refreshed(wanted.early(list_listed(runs_dir, rows=rows))))
    finally:
        if paused:
            gc.enable()


def refresh(rows: list) -> list:
    """Runs whose supervisor died, worked out again (cockpit.launch.control); problems go to stderr."""
    from cockpit.launch.control import reconcile_runs

    return reconcile_runs(rows, notice)


def refreshed(listed: list[Listed]) -> list[Listed]:
    """``listed`` with the runs still going worked out again (``refresh``): only those can have lost their
    supervisor (a finished or unreadable run is left as it is), so a listing of finished runs asks no launcher."""
    live = [(i, item.run_dir, item.status) for i, item in enumerate(listed)
            if item.status is not None and not item.summarised and not item.status.final
            and item.status.state != UNREADABLE]
    if not live:
        return listed
    out = list(listed)
    for (i, _, _), (run_dir, status) in zip(live, refresh([(d, s) for _, d, s in live]), strict=True):
        out[i] = Listed(run_dir, status, created=status.created)
    return out


def print_json(listed: list[Listed]) -> None:
    """``{"runs": [...]}``, indented by 2 as json.dumps writes it whole, written one run at a time."""
    write = sys.stdout.write
    write('{\n  "runs": [')
    first = True
    for item in listed:
        got = printed(item)
        if got is None:  # gone since it was listed
            continue
        status, forecast = got
        if forecast is None:
            from cockpit.insight.forecast_inputs import run_forecast

            forecast = run_forecast(item.run_dir, status)
        who = owner(item.run_dir)  # another user's run
        text = json.dumps({**status.to_dict(), "run_dir": str(item.run_dir), "forecast": forecast.to_dict(),
                           **({"owner": who} if who else {})}, indent=2)
        write(("\n" if first else ",\n") + "\n".join("    " + line for line in text.split("\n")))
        first = False
    write("]\n}\n" if first else "\n  ]\n}\n")
