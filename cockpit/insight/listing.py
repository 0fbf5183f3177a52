"""The runs of a runs directory as `cockpit ps` lists them: a finished run from its summary.json (one small file:
its row and its forecast; cockpit.run.summary), every other run from its status.json as
cockpit.run.store.list_runs reads it.

A finished run of the caller's whose summary is missing or stale (a run of an older cockpit, a status.json
rewritten since) is read from its status.json and its summary written on the way; one without a forecast yet
(the writers of status.json stand below insight, so they leave it out) gets it here, once. Another user's run is
never written: it is worked out the same way each time. A finished run is held as its row and its forecast, not
its whole status, so a listing of thousands of runs holds thousands of rows; `ps --json` reads each whole status
again as it prints it (``full_status``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from pathlib import Path

from cockpit.insight.forecast import Forecast
from cockpit.insight.forecast_inputs import ended_forecast
from cockpit.run import layout, summary
from cockpit.run.status import RunStatus
from cockpit.run.store import listed_status, run_dirs
from cockpit.run.trust import owner


@dataclass(frozen=True)
class Listed:
    """One run of a listing."""

    run_dir: Path
    # summarised: only the ps row's fields (summary.ROW_FIELDS), or None where the listing keeps no rows;
    # else the whole status
    status: RunStatus | None
    forecast: Forecast | None = None  # a finished run's, stored; None: the caller works it out now
    summarised: bool = False
    created: float = 0.0  # the status's (the listing's order)


def list_listed(runs_dir: Path, *, rows: bool = True) -> list[Listed]:
    """Every run under ``runs_dir``, oldest first: the runs list_runs lists, in its order and states.
    ``rows=False``: a summarised run without its row (``full_status`` reads the run when it is printed), so
    the listing of thousands of runs holds a path and a forecast for each, not a status."""
    found = []
    for d in run_dirs(runs_dir):
        listed = _listed(d)
        if listed is not None:
            found.append(listed if rows or not listed.summarised else replace(listed, status=None))
    return sorted(found, key=lambda item: item.created)


def _listed(run_dir: Path) -> Listed | None:
    text_dir = str(run_dir)
    stamp = summary.stamp_of(f"{text_dir}/{layout.STATUS}")
    kept = None if stamp is None else summary.read(text_dir, stamp)
    if kept is None:  # none, stale or unreadable: the run as list_runs reads it
        got = listed_status(run_dir)
        if got is None:
            return None
        status, read_stamp = got
        if read_stamp is None or not summary.summarises(status):
            return Listed(run_dir, status, created=status.created)
        kept = summary.of_status(status, read_stamp)
    elif kept.forecast is not None:
        with contextlib.suppress(ValueError):  # not a forecast (written by hand?): made again below
            return Listed(run_dir, kept.status, Forecast.from_dict(kept.forecast), True, kept.status.created)
    return _with_forecast(run_dir, kept)


def _with_forecast(run_dir: Path, kept: summary.Summary) -> Listed | None:
    """``kept`` with its forecast made now, and written into the run's summary (a run of the caller's)."""
    metrics = summary.metrics_stamp(run_dir)  # before the metrics are read: a line added since makes it stale
    forecast = ended_forecast(run_dir, kept.status)
    if forecast is None:  # (summary.summarises leaves out every run this can be)
        got = listed_status(run_dir)
        return None if got is None else Listed(run_dir, got[0], created=got[0].created)
    if owner(run_dir) is None:
        with contextlib.suppress(OSError):  # a cache: one not written is made again by the next listing
            summary.write(run_dir, replace(kept, forecast=forecast.to_dict()), metrics)
    return Listed(run_dir, kept.status, forecast, True, kept.status.created)


def full_status(listed: Listed) -> RunStatus | None:
    """The whole status of a listed run (read again for a summarised one); None when its status.json has
    gone since it was listed. One changed since is read as it is now, an unreadable one as list_runs does."""
    if not listed.summarised and listed.status is not None:
        return listed.status
    got = listed_status(listed.run_dir)
    return None if got is None else got[0]
