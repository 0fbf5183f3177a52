"""Messages the workers post to the UI. Data, one per fact; the ones a fast producer repeats coalesce
(``can_replace``): a newer one supersedes an older one still waiting in the queue, so a busy UI handles the
latest state once instead of every intermediate one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from cockpit.fleet.records import NodeReport
from cockpit.logs.diagnose.model import Report
from cockpit.plot.series import RankSeries
from cockpit.run.store import RunStatus
from cockpit.tui.models.form import Checked

if TYPE_CHECKING:
    from cockpit.tui.widgets.ready_strips import Ready


class FleetUpdated(Message):
    def __init__(self, nodes: list[NodeReport]) -> None:
        super().__init__()
        self.nodes = nodes

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FleetUpdated)


class FeedReady(Message):
    """The run feed has something to drain (lines, status, events). Carries nothing: the handler drains."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FeedReady)


class JobsListed(Message):
    """The user's Slurm jobs (cockpit.slurm.jobs.UserJob), or why Slurm did not answer."""

    def __init__(self, jobs: list, error: str | None = None) -> None:
        super().__init__()
        self.jobs, self.error = jobs, error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, JobsListed)


class RunsListed(Message):
    def __init__(self, runs: list[tuple[Path, RunStatus]], frozen: dict[Path, tuple[int, str]] | None = None) -> None:
        super().__init__()
        self.runs = runs
        self.frozen = frozen or {}  # run directory -> (pid, state) of its frozen supervisor

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RunsListed)


class Validated(Message):
    """The form was checked: its problems and the preview of what would run."""

    def __init__(self, checked: Checked, preview: str, advice: str = "") -> None:
        super().__init__()
        self.checked = checked
        self.preview = preview
        self.advice = advice  # interface advice for NCCL_SOCKET_IFNAME (ssh jobs over several nodes)

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, Validated)


class Diagnosed(Message):
    def __init__(self, report: Report) -> None:
        super().__init__()
        self.report = report


class MetricsRead(Message):
    """The side panel's rank's series (None: no rank has points yet), and where its points come from (one of
    cockpit.plot.sources.ORDER, or BEATS)."""

    def __init__(self, series: RankSeries | None, origin: str | None = None) -> None:
        super().__init__()
        self.series, self.origin = series, origin

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, MetricsRead)


class ForecastRead(Message):
    """The run's forecast line, and for a sweep its trial table's rows (cockpit.insight.sweep_table.TrialRow)."""

    def __init__(self, line: str, trials: list | None) -> None:
        super().__init__()
        self.line = line
        self.trials = trials

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ForecastRead)


class ChartsRead(Message):
    """The charts screen's data for one (metric, pick): the chart as a value (None for the GPU chart, drawn
    from the app's fleet history), the ranks (or a sweep's trials) there are, and each rank's GPU."""

    def __init__(self, metric: str, pick: int | None, chart, ids: list[int], gpus: dict | None,
                 sweep: bool, local: bool = False) -> None:
        super().__init__()
        self.metric, self.pick, self.chart, self.ids, self.gpus, self.sweep = metric, pick, chart, ids, gpus, sweep
        self.local = local  # the run's ranks are all on this machine (the local launcher)
        self.drawn: tuple | None = None  # the chart's picture drawn by the worker (widgets chart_plot, heat_map)
        self.ready: Ready | None = None  # that picture as strips, prepared by the worker (widgets.ready_strips.Ready)
        self.node: str | None = None  # the node whose ranks it shows (the charts' `n`); None: every node
        self.nodes: list[str] = []  # the run's nodes, those of flagged ranks first

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ChartsRead)
