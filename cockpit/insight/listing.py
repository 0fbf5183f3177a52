"""The runs of a runs directory as `cockpit ps` lists them: a finished run from its summary.json (one small file:
its row and its forecast; cockpit.run.summary), every other run from its status.json as
cockpit.run.store.list_runs reads it.

A finished run of the caller's whose summary is missing or stale (a run of an older cockpit, a status.json
rewritten since) is read from its status.json and its summary written on the way; one without a forecast yet
(the writers of status.json stand below insight, so they leave it out) gets it here, once. Another user's run is
never written: it is worked out the same way each time. A finished run is held as its row and its forecast, not
its whole status, so a listing of thousands of runs holds thousands of rows; `ps --json` reads each whole status
again as it prints it (``full_status``).

The runs directory's index (cockpit.run.index) holds the summaries of its finished runs in one file: a run whose
entry is fresh (three stats) is listed from it, without opening its summary.json; every other run as above, and the
index written again when anything in it was missing, stale or gone.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, fields, replace
from pathlib import Path

from cockpit.fs.safeio import Untrusted
from cockpit.insight.forecast import Forecast
from cockpit.run import index, layout, summary
from cockpit.run.status import RunStatus
from cockpit.run.store import listed_status, run_dirs
from cockpit.run.trust import owner

_FORECAST_FIELDS = tuple(f.name for f in fields(Forecast))  # (Forecast's order: its constructor's)
_HEAD = index.header(_FORECAST_FIELDS)
_CREATED = summary.ROW_FIELDS.index("created")


@dataclass(frozen=True, slots=True)  # (slots: thousands of them in a listing)
class Listed:
    """One run of a listing."""

    run_dir: Path
    # summarised: only the ps row's fields (summary.ROW_FIELDS), or None where the listing keeps no rows;
    # else the whole status
    status: RunStatus | None
    forecast: Forecast | None = None  # a finished run's, stored; None: the caller works it out now (or, ps --json:
    # reads the stored one where it prints the run, ``printed``)
    summarised: bool = False
    created: float = 0.0  # the status's (the listing's order)


def list_listed(runs_dir: Path, *, rows: bool = True) -> list[Listed]:
    """Every run under ``runs_dir``, oldest first: the runs list_runs lists, in its order and states.
    ``rows=False``: a summarised run without its row (``printed`` reads the run when it is printed), and one
    listed from the index without its forecast too, so the listing of thousands of runs holds a path for each.

    A finished run whose entry in the runs directory's index (cockpit.run.index) is fresh is listed from it:
    three stats, no open. Every other run is read as ``_listed`` does; the index is written again when an entry
    was missing, stale or of a run that is gone (and left as it is when it cannot be: a read-only directory,
    another user's)."""
    with index.lines(runs_dir, _HEAD) as kept:  # (an offset per run held, not its line: index.Lines)
        fresh: list[str] = []  # the runs whose entries are fresh
        made: list[bytes] = []  # the entries made now
        changed = kept is None
        found = []
        for d in run_dirs(runs_dir):
            line = None if kept is None else kept.take(d.name)
            listed = None if line is None else _indexed(d, line, rows)
            if listed is not None:
                fresh.append(d.name)
            else:
                listed, new = _listed(d)
                if new is not None:
                    made.append(new)
                changed = changed or new is not None or line is not None
                if listed is not None and not rows and listed.summarised:
                    listed = replace(listed, status=None)
            if listed is not None:
                found.append(listed)
        gone = kept is not None and kept.left() > 0  # entries of runs that are gone
    if changed or gone:
        _rewrite(runs_dir, fresh, made)
    return sorted(found, key=lambda item: item.created)


def _rewrite(runs_dir: Path, fresh: list[str], made: list[bytes]) -> None:
    """The index again: the ``fresh`` runs' entries as the index has them now (read again, not held through the
    listing; one a listing at the same time dropped is made by the next listing), and the ones ``made`` now."""
    now = index.read(runs_dir, _HEAD) or {}
    kept = [line for name in fresh if (line := now.get(name)) is not None]
    with contextlib.suppress(OSError, Untrusted):  # a cache: one not written is made by the next listing
        index.write(runs_dir, _HEAD, [*kept, *made])


def _indexed(run_dir: Path, line: bytes, rows: bool) -> Listed | None:
    """The run as its index ``line`` has it, when every file the entry was made from is still the one it was
    made from (cockpit.run.index); None otherwise, or when the line is not an entry."""
    e = index.entry(line)
    if e is None:
        return None
    text_dir = str(run_dir)
    if (summary.stamp_of(f"{text_dir}/{layout.STATUS}") != e.status
            or summary.stamp_of(f"{text_dir}/{layout.SUMMARY}") != e.summary
            or summary.metrics_stamp(text_dir) != e.metrics):
        return None
    try:  # the entry's values are those of a checked status and forecast (its CRC: cockpit.run.index)
        if not rows:  # (its forecast is read again where it is printed: ``printed``; not held for thousands)
            if len(e.forecast) != len(_FORECAST_FIELDS):
                return None
            return Listed(run_dir, None, None, True, e.row[_CREATED])
        return Listed(run_dir, _row_status(e.row), Forecast(*e.forecast), True, e.row[_CREATED])
    except (TypeError, ValueError):  # of another layout after all (StatusError too): read the slow way
        return None


def _row_status(values: list) -> RunStatus:
    """A RunStatus of a row's values; its records (findings, history, attempts) typed as from_dict types them."""
    row = dict(zip(summary.ROW_FIELDS, values, strict=True))
    if row["findings"] or row["history"] or row["attempts"]:
        return RunStatus.from_dict(row)
    return RunStatus(**row)


def _listed(run_dir: Path) -> tuple[Listed | None, bytes | None]:
    """The run read from its summary.json, else its status.json, and its index line (None: not indexed)."""
    text_dir = str(run_dir)
    stamp = summary.stamp_of(f"{text_dir}/{layout.STATUS}")
    kept = None if stamp is None else summary.read(text_dir, stamp)
    if kept is None:  # none, stale or unreadable: the run as list_runs reads it
        got = listed_status(run_dir)
        if got is None:
            return None, None
        status, read_stamp = got
        if read_stamp is None or not summary.summarises(status):
            return Listed(run_dir, status, created=status.created), None
        kept = summary.of_status(status, read_stamp)
    elif kept.forecast is not None:
        with contextlib.suppress(ValueError):  # not a forecast (written by hand?): made again below
            forecast = Forecast.from_dict(kept.forecast)
            return (Listed(run_dir, kept.status, forecast, True, kept.status.created),
                    _line(run_dir, kept, kept.forecast, kept.metrics))
    return _with_forecast(run_dir, kept)


def _with_forecast(run_dir: Path, kept: summary.Summary) -> tuple[Listed | None, bytes | None]:
    """``kept`` with its forecast made now, and written into the run's summary (a run of the caller's)."""
    from cockpit.insight.forecast_inputs import ended_forecast  # (a listing from the index reads no metrics)

    metrics = summary.metrics_stamp(run_dir)  # before the metrics are read: a line added since makes it stale
    forecast = ended_forecast(run_dir, kept.status)
    if forecast is None:  # (summary.summarises leaves out every run this can be)
        got = listed_status(run_dir)
        return (None if got is None else Listed(run_dir, got[0], created=got[0].created)), None
    made = forecast.to_dict()
    if owner(run_dir) is None:
        with contextlib.suppress(OSError):  # a cache: one not written is made again by the next listing
            summary.write(run_dir, replace(kept, forecast=made), metrics)
    return Listed(run_dir, kept.status, forecast, True, kept.status.created), _line(run_dir, kept, made, metrics)


def _line(run_dir: Path, kept: summary.Summary, forecast: dict, metrics: summary.Stamp | None) -> bytes | None:
    """The index line of a run listed from ``kept`` and ``forecast``; summary.json's identity is taken now, after
    it was read or written (one changed since makes the entry stale: read the slow way, and rebuilt)."""
    got = summary.stamp_of(run_dir / layout.SUMMARY)
    return index.line(run_dir.name, kept.status_stamp, got, metrics, summary.row_dict(kept.status),
                      [forecast[k] for k in _FORECAST_FIELDS])


def printed(listed: Listed) -> tuple[RunStatus, Forecast | None] | None:
    """The whole status of a listed run (read again for a summarised one) and its stored forecast: the listing's,
    else (a run listed without it, ``rows=False``) the one its summary holds for the status read now; None: the
    caller works it out now. None for a run whose status.json has gone since it was listed. One changed since is
    read as it is now, an unreadable one as list_runs does."""
    if not listed.summarised and listed.status is not None:
        return listed.status, listed.forecast
    got = listed_status(listed.run_dir)
    if got is None:
        return None
    status, stamp = got
    if listed.forecast is not None or stamp is None:
        return status, listed.forecast
    stored = summary.stored_forecast(str(listed.run_dir), stamp)
    try:
        return status, None if stored is None else Forecast.from_dict(stored)
    except ValueError:  # not a forecast (written by hand?): worked out now
        return status, None
