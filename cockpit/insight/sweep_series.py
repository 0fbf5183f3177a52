"""A sweep's charts: each trial's series read as it grows, and the chart of a metric over all trials (the
trials' loss curves on one chart, labelled with their arguments; rate and heat with a row or a line per trial).

One place for what `cockpit plot SWEEP` and the TUI's charts screen both draw. Incremental: a trial's
cockpit.plot.source.RunSeries is kept across polls, so each poll reads only what its trials appended (and at
most cockpit.plot.source.CHUNK per file). IO in ``poll`` only; the chart itself is pure.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cockpit.insight.sweep_table import TrialRow, trial_rows
from cockpit.plot import chart as charts
from cockpit.plot.series import RankSeries
from cockpit.plot.source import RunSeries
from cockpit.run.store import FINAL_STATES, RunStatus

Trials = list[tuple[TrialRow, RankSeries | None]]
WAIT_NOTE = "a sweep's trials are separate runs whose ranks never wait for each other: open a trial's run"


class SweepSeries:
    """The trials of one sweep run directory; ``poll`` brings them up to date."""

    def __init__(self, run_dir: Path, keep: int = 500):
        self.run_dir, self.keep = Path(run_dir), keep
        self.rows: list[TrialRow] = []
        self._readers: dict[Path, RunSeries] = {}

    def poll(self, status: RunStatus) -> bool:
        """Read what every trial appended (``status``: the sweep's, which lists its trials); True if any point
        arrived."""
        self.rows = trial_rows(self.run_dir, status)
        new = False
        for row in self.rows:
            reader = self._readers.get(row.run_dir)
            if reader is None:
                reader = self._readers[row.run_dir] = RunSeries(row.run_dir, self.keep)
            new |= reader.poll()
        return new

    def poll_all(self, status: RunStatus, max_polls: int = 1000) -> None:
        """Read everything there is now (a headless reader)."""
        for _ in range(max_polls):
            if not self.poll(status):
                return

    def trials(self, rank: int = 0) -> Trials:
        """Per trial, in trial order: its row and the series of its rank ``rank`` (None: no points yet)."""
        out = []
        for row in self.rows:
            reader = self._readers.get(row.run_dir)
            found = reader.series([rank]) if reader is not None else []
            out.append((row, found[0] if found else None))
        return out


def trial_label(row: TrialRow) -> str:
    """'trial 2 --lr 0.1': how a trial is named in a legend."""
    return f"trial {row.index} {' '.join(row.args)}".strip()


def sweep_chart(metric: str, trials: Trials, title: str, width: int, height: int,
                log_y: bool = False) -> charts.Chart:
    """The chart of ``metric`` (cockpit.plot.chart.METRICS) over a sweep's trials: loss curves labelled with
    each trial's arguments; rate and heat with the trial's index where a rank's would be (a finished trial's
    row is blank after its end, not stalled)."""
    if metric == "loss":
        named = [(trial_label(row), s) for row, s in trials]
        return replace(charts.trials_chart(named, f"{title}: loss per trial", width), log_y=log_y)
    if metric == "wait":
        empty = charts.wait_chart([], f"{title}: share of time waiting in collectives", 1, 1)
        return replace(empty, note=WAIT_NOTE)
    series = [replace(s, rank=row.index) for row, s in trials if s is not None]
    ended = {row.index for row, _ in trials if row.state in FINAL_STATES}
    chart = charts.build(metric, series, title, width, height, ended=ended, log_y=log_y)
    return charts.relabel(chart, "rank", "trial")
