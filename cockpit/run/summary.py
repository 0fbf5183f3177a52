"""summary.json: what `cockpit ps` shows of a finished run, kept beside its status.json, so that listing thousands
of runs reads one small file per finished run instead of its whole status, its job and the tail of its metrics.

Only a finished run has one: cockpit.run.store.write_status writes it with the final status. A run still going
is listed from its status.json, as its row depends on the clock and on live processes; so is a sweep's own run
(its cells come from its trials). The file holds:

    version   SUMMARY_VERSION; a summary of another version is no summary
    status    status.json's identity when it was summarised: [inode, mtime ns, size]. status.json is only ever
              replaced whole (a rename), so every write gives it a new one: a summary whose stamp is not the
              file's now is stale
    row       the status fields a ps row shows (ROW_FIELDS), as status.json has them
    forecast  the run's forecast, added once by the first listing that needs it (cockpit.insight.listing: the
              forecast is insight, which the writers of status.json stand below), or null
    metrics   rank 0's metrics file's identity when the forecast read it (null: there was none); the forecast
              is dropped when it no longer matches

A summary that is missing, stale or unreadable (not JSON, a field of another type, a symlink, a FIFO) is no
summary: ``read`` says None and the caller lists the run from status.json and writes a new one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from cockpit.fs import safeio
from cockpit.run import layout
from cockpit.run.status import RunStatus, StatusError

SUMMARY_VERSION = 2  # 2: recover, attempts and goodput (the ATTEMPTS column)
MAX_SUMMARY_BYTES = (64 << 10) - 1  # a summary is a few hundred bytes; a larger one is none (the run is read whole)
ROW_FIELDS = ("run_id", "name", "launcher", "job_file", "hosts", "world_size", "state", "created", "started",
              "ended", "exit_code", "note", "findings", "history", "recover", "attempts", "goodput")

_IN_ROW = frozenset(ROW_FIELDS)  # (membership, for the thousands of rows of a listing)
Stamp = tuple[int, int, int]  # (inode, mtime ns, size)


def stamp_of(path: str | Path) -> Stamp | None:
    """``path``'s identity (not following a symlink); None when it is not there or cannot be looked at."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def metrics_stamp(run_dir: str | Path) -> Stamp | None:
    """The identity of rank 0's metrics file, which a forecast reads (cockpit.insight.forecast_inputs)."""
    return stamp_of(f"{run_dir}/{layout.metrics_name(0)}")


@dataclass(frozen=True)
class Summary:
    """A finished run as ps lists it."""

    status: RunStatus  # only its ROW_FIELDS are those of the run's status; the rest are defaults
    status_stamp: Stamp  # the identity of the status.json it was made from
    forecast: dict | None = None  # Forecast.to_dict() of the run as its metrics are now; None: not made yet
    metrics: Stamp | None = None  # with a forecast: the identity of the metrics file it was made from


def summarises(status: RunStatus) -> bool:
    """Whether a run with ``status`` has a summary: one that has ended (at a time, where it had started: its
    GPU-hours are fixed), and is no sweep's own run."""
    return (status.final and (status.started is None or bool(status.ended))
            and not any(n.trial is not None for n in status.nodes))


def of_status(status: RunStatus, status_stamp: Stamp) -> Summary:
    """The summary of ``status`` (``summarises``), read from the status.json of identity ``status_stamp``."""
    return Summary(RunStatus.from_dict(row_dict(status)), status_stamp)


def row_dict(status: RunStatus) -> dict[str, object]:
    """The fields of ``status`` a ps row shows (ROW_FIELDS), as status.json has them."""
    return {k: v for k, v in status.to_dict().items() if k in _IN_ROW}


def text(kept: Summary, metrics: Stamp | None = None) -> str:
    """summary.json's text; ``metrics``: the identity of the metrics file the forecast was made from."""
    return json.dumps({"version": SUMMARY_VERSION, "status": list(kept.status_stamp), "row": row_dict(kept.status),
                       "forecast": kept.forecast, "metrics": None if metrics is None else list(metrics)},
                      sort_keys=True) + "\n"


def write(run_dir: Path, kept: Summary, metrics: Stamp | None = None) -> None:
    """summary.json, atomically, into a run directory of the caller's (safeio.Untrusted otherwise). Not flushed
    to disk first: after a crash a summary may be empty or old, which ``read`` takes for none."""
    safeio.write_atomic(run_dir / layout.SUMMARY, text(kept, metrics), own_dir=True, sync=False)


def _read_small(path: str) -> bytes:
    """The file at ``path``, a regular file only (safeio.open_fd), with one read of at most MAX_SUMMARY_BYTES + 1
    (half the cost of safeio.read_bytes' buffered one, for a listing that reads thousands); ValueError beyond."""
    fd = safeio.open_fd(path)
    try:
        data = os.read(fd, MAX_SUMMARY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_SUMMARY_BYTES:
        raise ValueError(f"{path}: larger than {MAX_SUMMARY_BYTES} bytes")
    return data


def read(run_dir: str | Path, status_stamp: Stamp) -> Summary | None:
    """The run's summary when it is fresh: made from the status.json whose identity is ``status_stamp``, its
    forecast (if any) from rank 0's metrics as they are now. None when it is missing, stale or unreadable.
    (Paths as text: pathlib's joins cost a listing of thousands of runs as much as the reads.)"""
    got = _fresh(run_dir, status_stamp)
    if got is None:
        return None
    row, forecast, metrics = got
    if not isinstance(row, dict):  # (its depth: each field's type is checked, and only a row is printed of it)
        return None
    try:
        status = RunStatus.from_dict({k: v for k, v in row.items() if k in _IN_ROW})
    except StatusError:  # written by hand or by another cockpit: no summary, made again
        return None
    return Summary(status, status_stamp, forecast, metrics)


def stored_forecast(run_dir: str | Path, status_stamp: Stamp) -> dict | None:
    """The forecast the run's summary holds (``read``'s, without reading its row), when the summary was made from
    the status.json of identity ``status_stamp`` and its forecast from rank 0's metrics as they are now; None
    otherwise (none, stale, unreadable, not made yet)."""
    got = _fresh(run_dir, status_stamp)
    return None if got is None else got[1]


def _fresh(run_dir: str | Path, status_stamp: Stamp) -> tuple[object, dict | None, Stamp | None] | None:
    """summary.json's row, forecast and metrics identity, when it is a summary of the status.json of identity
    ``status_stamp`` (forecast and metrics None when the metrics changed since); None when it is none of it."""
    try:
        data = safeio.loads(_read_small(f"{run_dir}/{layout.SUMMARY}"))
    except (OSError, ValueError):  # none, a symlink or special file, too large, not JSON: no summary
        return None
    if (not isinstance(data, dict) or data.get("version") != SUMMARY_VERSION
            or data.get("status") != list(status_stamp)):
        return None
    forecast, metrics = data.get("forecast"), None
    if forecast is not None:
        metrics = metrics_stamp(run_dir)
        if not isinstance(forecast, dict) or data.get("metrics") != (None if metrics is None else list(metrics)):
            forecast = metrics = None  # the metrics changed since: made again
    return data.get("row"), forecast, metrics
