"""The run view's decisions and words, as pure functions (no textual, no IO): how often a batch is applied,
the title line, the findings panel's rows and what selecting one shows, which rank's metrics to plot, and
where an evidence line sits in the log. cockpit.tui.screens.run_view puts them on screen."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.tui.models.log_filter import LEVEL_NAMES
from cockpit.tui.models.log_store import MERGED, label

if TYPE_CHECKING:
    from cockpit.insight.forecast import Forecast
    from cockpit.insight.sweep_table import TrialRow
    from cockpit.logs.diagnose.model import Report
    from cockpit.run.store import RunStatus
    from cockpit.tui.models.feed_state import LiveEvent

APPLY_EVERY = 0.05  # seconds: at most 20 log repaints a second
# columns under which the side panel goes under the log: beside it, 80 columns left the log 42, and a progress
# line's loss= off its right edge (issue 33's new-user pass); 100 leaves it 62, which holds one
NARROW = 100
# rows under which the findings and the panel under the log take less room: at 60x15 their 5 + 6 rows left the
# log none (issue 45's new-user pass); from 24 rows (80x24) the layout is as it was
SHORT = 24
# under a storm (a batch of more than STORM_LINES lines), at most 10: each repaint redraws every row of the log,
# and on a busy machine a key press that lands behind one waits for it (bench_tui: key p50 halved)
APPLY_EVERY_STORM, STORM_LINES = 0.1, 1000
REBUILD_EVERY = 1.0  # seconds between two rebuilds of a grouped rank table for new sources, at most
HIDDEN_FROM_REPORT = {"stall", "stopped", "straggler"}  # shown live from status.json above the report


def apply_every(batch_lines: int) -> float:
    """The pause before the next batch is applied, after one of ``batch_lines`` lines."""
    return APPLY_EVERY_STORM if batch_lines > STORM_LINES else APPLY_EVERY


# the merged view of an ended run: its lines carry no time (the rank wrapper appends the process's output to
# its file as it is, the way torchrun's own files do); cockpit.tui.models.log_order places them by what is known
ESTIMATED = "all ranks, order estimated"


def title_text(status: RunStatus | None, view: tuple | None, filter_text: str, follow: bool, skipped: int,
               width: int | None = None, sources: int = 2) -> str:
    """The line above the log: the run's state, the view and its filter, follow, and lines the live scan
    skipped (the full diagnosis reads them). An ended run's "all ranks" says its order is an estimate (live,
    lines show in the order they are read, each poll's ranks one after the other; a run of one log, ``sources``,
    has its own order); where that leaves the line longer than ``width``, the filter is left out while it is the
    default (all lines)."""
    s = status
    # a stopped run's code is torchrun's after the stop (1, from its SignalException): a failure that did not
    # happen, which `cockpit run` / `attach` do not say either (they exit 143 or 130); the rank table has each code
    code = s is not None and s.final and s.state != "stopped"
    state = "reading…" if s is None else s.state + (f" (exit {s.exit_code})" if code else "")
    launcher = "" if s is None else f" · {s.launcher}"
    ranks = "" if s is None or s.world_size is None else f" · {s.world_size} rank{'s' if s.world_size != 1 else ''}"
    estimated = s is not None and s.final and sources > 1
    shown = (ESTIMATED if estimated else "all ranks") if view is MERGED else label(view)
    parts = [f"{state}{launcher}{ranks}", shown, filter_text, "follow" if follow else "paused"]
    if skipped:
        parts.append(f"live scan skipped {skipped} lines (d: full diagnosis)")
    if width is not None and len(" · ".join(parts)) > width and filter_text == LEVEL_NAMES["all"]:
        parts.remove(filter_text)
    return " · ".join(parts)


def forecast_text(forecast: Forecast, status: RunStatus) -> str:
    """The line under the title: the forecast's, but for a live run that stalls (or whose rank is stopped) no eta:
    the rate from before the stall promised an end ("9s to go; fits: yes" beside the STALL finding, issue 33 item
    8, as `cockpit ps` said before it too showed `? no progress`)."""
    if forecast.ended or not any(f.kind in ("stall", "stopped") for f in status.findings):
        return forecast.line()
    done = "?" if forecast.steps_done is None else forecast.steps_done
    total = "?" if forecast.total_steps is None else forecast.total_steps
    return f"forecast: step {done}/{total}; ? no progress (no eta while it is stalled); {forecast.gpu_text()}"


@dataclass(frozen=True)
class FindingRow:
    """One line of the findings panel. ``id``: h<i> a hang finding (status.json), f<i> one of the report's,
    e<i> a live event, "none" a disabled placeholder (plain text, no style)."""

    text: str
    id: str
    style: str = ""
    disabled: bool = False


def finding_rows(hang: list, report: Report | None, events: list[LiveEvent]) -> list[FindingRow]:
    """Hang findings first (they are live); then the diagnosis once there is one, else the live events."""
    rows = [FindingRow(f"{f.kind.upper():<7} {f.text}", f"h{i}",
                       "bold red" if f.severity == "error" else "bold yellow") for i, f in enumerate(hang)]
    if report is not None:
        items = [FindingRow(f"{f.severity.upper():<7} {f.title}", f"f{i}") for i, f in enumerate(report.findings)]
        rows += items or [FindingRow("diagnosis: no problems found", "none", disabled=True)]
    elif events:
        rows += [FindingRow(f"live    {label(e.source)} {e.kind}: {e.text}", f"e{i}") for i, e in enumerate(events)]
    elif not hang:
        rows.append(FindingRow("diagnosis: nothing found yet (d: diagnose the logs now)", "none", disabled=True))
    return rows


def finding_detail(oid: str, hang: list, report: Report | None, events: list[LiveEvent],
                   run_dir: Path) -> tuple[str, str, list] | None:
    """(title, hint, evidence) of the row ``oid`` for the evidence screen; None for a row that has none."""
    if oid.startswith("h") and int(oid[1:]) < len(hang):
        f = hang[int(oid[1:])]
        nxt = f" (next: {f.next})" if f.next else ""
        title, hint = f"{f.kind.upper()} {f.text}", f.hint + nxt
        from cockpit.hang.finding import evidence_of

        return title, hint, list(evidence_of(f, run_dir))
    if oid.startswith("f") and report is not None:
        f = report.findings[int(oid[1:])]
        return f"{f.severity.upper()} {f.title}", f.hint, list(f.evidence)
    if oid.startswith("e"):
        e = events[int(oid[1:])]
        return f"{e.kind} on {label(e.source)}", e.text, [(e.source, e.line)]
    return None


SIDE_FIRST = (0, 1, 2, 3)  # the ranks the side panel reads in the merged view: the lowest that wrote metrics is shown


def side_ranks(view: tuple | None) -> set[int]:
    """The ranks whose files the side panel reads: the viewed one and the first few (metrics_rank picks among
    them; when none wrote metrics, the reader falls back to every rank)."""
    viewed = view[1] if view is not MERGED and view is not None and isinstance(view[1], int) else None
    return {*SIDE_FIRST, *([viewed] if viewed is not None else [])}


def metrics_rank(view: tuple | None, ranks: list[int]) -> int | None:
    """The rank whose metrics are plotted: the viewed one, else (merged view, an agent, a rank that wrote
    none) the first that wrote any."""
    rank = view[1] if view is not MERGED and view[1] != "agent" else None
    if rank not in ranks:
        rank = ranks[0] if ranks else None
    return rank


def evidence_target(source: tuple | None, line_no: int, text: str | None, view: tuple | None,
                    source_lines: int | None, log_lines: int) -> tuple[str | None, int | None]:
    """The text to look for in the log, and the row it should be on (None: search from the end). The merged
    view prefixes every line with its [host:rank]; a source's own view holds its last ``log_lines`` of
    ``source_lines`` lines."""
    merged = view is MERGED
    if text is not None and merged and source is not None:
        text = f"{label(source)} {text}"
    near = None if source_lines is None or merged else line_no - 1 - (source_lines - log_lines)
    return text, near


# A sweep's trial table (key, title, width): fixed widths, so rows that fill in do not move the columns.
TRIAL_COLUMNS = (("trial", "trial", 5), ("state", "state", 10), ("steps", "steps", 11), ("loss", "loss", 10),
                 ("forecast", "forecast", 16), ("args", "args", 48))
TRIAL_SORTS = ("trial", "loss")  # what `o` cycles through


def trial_cells(row: TrialRow) -> tuple[str, ...]:
    """One trial's cells: its index, state, steps (of the total), last loss, forecast and arguments."""
    total = row.forecast.total_steps
    steps = "-" if row.steps is None else f"{row.steps}/{total}" if total else str(row.steps)
    loss = "-" if row.last_loss is None else f"{row.last_loss:.4g}"
    fc = "-" if row.forecast.ended or row.state == "pending" else row.forecast.short()
    return (str(row.index), row.state, steps, loss, fc, " ".join(row.args))


def sweep_line(rows: list[TrialRow], sort: str) -> str:
    """The forecast line of a sweep: trials by state, GPU-hours, the table's order."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.state] = counts.get(r.state, 0) + 1
    gpus = [r.forecast.gpu_hours for r in rows if r.forecast.gpu_hours is not None]
    held = "CPU-only" if all(r.forecast.gpus == 0 for r in rows) else f"{sum(gpus):.2f} GPU-h"
    states = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    return f"sweep: {len(rows)} trial{'s' if len(rows) != 1 else ''} ({states}); {held}; sorted by {sort} (o: sort)"
