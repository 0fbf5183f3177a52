"""The charts screen (`c` in the run view): a run's curves with axes, scale and a legend. Loss per rank over
steps, rate per rank over time, a rank x time heat map of the rate (a straggler or a stall at a glance), and
each rank's GPU utilisation and memory over time from Fleet's readings; for a sweep, the trials' loss curves
on one chart and rate / heat per trial. `m` cycles the chart, `r` picks one rank (or trial), `a` all again.

The charts are cockpit.plot's values (what `cockpit plot RUN --metric ...` draws), built in a thread worker
from cockpit.plot.source.RunSeries (or cockpit.insight.sweep_series for a sweep), polled once a second while the
screen is shown, each poll bounded. The series are kept between polls and a poll reads only the bytes appended;
when a poll brings points the worker builds every chart of the current view (and draws the line charts' plotext
pictures and turns them into textual strips, cockpit.tui.widgets.ready_strips), so that a key only swaps in what
is ready: no file read, no series sorted, no band computed, no plotext, no Text-to-strips conversion on the UI
thread. A poll that brings nothing builds nothing. The GPU chart is drawn from the app's fleet history
on the UI thread (small, in memory)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Footer, Static

from cockpit.plot.chart import HeatChart, LineChart
from cockpit.tui.messages import ChartsRead
from cockpit.tui.models import charts as chartsview
from cockpit.tui.screens.base import CockpitScreen
from cockpit.tui.widgets.chart_plot import ChartPlot, prerender
from cockpit.tui.widgets.heat_map import HeatMap, HeatStyles, heat_text
from cockpit.tui.widgets.navbar import NavBar
from cockpit.tui.widgets.ready_strips import Paint, Ready, prepare

if TYPE_CHECKING:
    from cockpit.insight.sweep_series import SweepSeries
    from cockpit.plot.source import RunSeries
    from cockpit.spec.model import JobSpec

# points kept per rank (up to twice that): several per column of a 200-column chart; the loss chart's band over
# 64 ranks is built from them once per poll that brings points
CHART_POINTS = 250
# the charts not on screen are built again every REST_EVERY polls that brought points (the one on screen at each):
# five charts and two plotext pictures a second took ~70 ms of a core, in a thread that shares the UI's GIL
REST_EVERY = 4


@dataclass(frozen=True)
class Looks:
    """What the worker draws the pictures for: chart-a's size and plotext theme (None: not known yet), the
    heat map's styles; and what it turns them into strips for (widgets.ready_strips): chart-a's paint (None
    with ``plot``) and the heat map's."""

    plot: tuple[int, int, str] | None
    heat: HeatStyles
    plot_paint: Paint | None = None
    heat_paint: Paint | None = None


@dataclass(frozen=True)
class View:
    """What a chart is built for besides its metric: the rank (trial) picked, the body's size, the y scale."""

    pick: int | None
    width: int
    height: int
    log_y: bool
    node: str | None = None  # one node's ranks (the heat map's drill-down); None: every node


class ChartsScreen(CockpitScreen):
    TITLE = "Charts"
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("m", "next_metric", "Next chart"),
        Binding("r", "next_pick", "Next rank"),
        Binding("a", "all", "All ranks"),
        Binding("n", "next_node", "Next node", show=False),
        Binding("l", "toggle_log", "Log y"),
    ]

    def __init__(self, run_dir: Path, metric: str = "loss") -> None:
        super().__init__()
        self.run_dir = Path(run_dir)
        self.metric = metric
        self.pick: int | None = None  # one rank (a sweep: one trial); None: all
        self.ids: list[int] = []  # the ranks (trials) with points, as last read
        self.node: str | None = None  # one node's ranks (`n`); None: all
        self.nodes: list[str] = []  # the run's nodes, those of flagged ranks first (as last read)
        self._hosts: dict[int, str] = {}  # rank -> host, read by the worker when the ranks change
        self.sweep = False
        self.shown: tuple | None = None  # what is on screen: (metric, pick, chart value), to skip equal redraws
        self._lock = threading.Lock()  # a cancelled worker's thread may still be reading
        self._run_series: RunSeries | None = None  # a run's; a sweep's is _sweep_series
        self._sweep_series: SweepSeries | None = None
        self._spec: JobSpec | Literal[False] | None = None  # the run's job, read once (False: unreadable)
        self.log_y = False
        self._first = True  # the first chart not yet chosen by the user: a run without a loss opens on its rate
        self._status = None  # the run's status as last read (by the worker, under _lock)
        self._version = 0  # counts the reads that brought points
        # every chart built, by (metric, view): a key draws from here. Replaced whole by the worker (never changed
        # in place), so the UI thread reads it without the lock. _built_at: the data version each was built at.
        self._ready: dict[tuple[str, View], ChartsRead] = {}
        self._built_at: dict[tuple[str, View], int] = {}
        self._solo: tuple[int, int] | None = None  # chart-a's size when it is the only chart, as last drawn
        self.builds = 0  # charts built so far (each a chart of one metric for one view)
        self.polls = 0  # reads of the run's files so far
        self._ready_looks: Looks | None = None  # what _ready's pictures are drawn for
        self._heat_seen: int | None = None  # the heat map's content width, as last shown

    def compose(self) -> ComposeResult:
        yield NavBar("runs", id="nav")
        yield Static("", id="charts-title", markup=False)
        with Vertical(id="charts-body"):
            yield ChartPlot(id="chart-a")
            yield ChartPlot(id="chart-b")
            yield HeatMap(id="chart-heat")
            yield Static("", id="charts-note", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(NavBar).info = self.run_dir.name
        self._show_title()
        self.call_after_refresh(self._first_poll)
        self.set_interval(1.0, self.poll)

    def _first_poll(self) -> None:
        """The first read once the screen is laid out: chart-a's size is known (it shows alone until a chart
        says otherwise), so that the very first pictures are drawn, and turned into strips, for it."""
        self._note_solo()
        self.poll()

    def on_resize(self) -> None:
        self.shown = None
        self.poll()

    def _view(self) -> View:
        body = self.query_one("#charts-body")
        return View(self.pick, max(20, body.size.width), max(6, body.size.height), self.log_y, self.node)

    def poll(self) -> None:
        """Read what the run appended (IO: in the worker) and build the charts anew if anything arrived."""
        self.read_charts(self.metric, self._view(), True, self._looks())

    def _looks(self) -> Looks:
        """What the pictures are drawn for: a line chart's size and theme (chart-a alone, as last seen; None
        before it was), the heat map's styles."""
        plot, heat = self.query_one("#chart-a", ChartPlot), self.query_one(HeatMap)
        return Looks(None if self._solo is None else (*self._solo, plot.theme_name()), heat.styles_now(),
                     None if self._solo is None else plot.ready_paint(self._solo[0]),
                     heat.ready_paint(self._heat_width()))

    def _heat_width(self) -> int:
        """The heat map's content width when shown: as last seen, or before that, the body's less its padding
        (app.tcss: 0 1)."""
        if self._heat_seen is not None:
            return self._heat_seen
        return max(0, self.query_one("#charts-body").size.width - 2)

    # --- keys ---------------------------------------------------------------------------------------------------
    def action_next_metric(self) -> None:
        self._first = False
        self.metric = chartsview.next_metric(self.metric)
        self._changed()

    def action_next_pick(self) -> None:
        self.pick = chartsview.next_pick(self.pick, self.ids)
        self.node = None
        self._changed()

    def action_next_node(self) -> None:
        """One node's ranks (past 64 ranks the heat maps show a row per node): the nodes of the ranks the
        watchdog flags first, then in order; after the last, every node again."""
        self.node = chartsview.next_node(self.node, self.nodes)
        self.pick = None
        self._changed()

    def action_toggle_log(self) -> None:
        """The loss and rate charts' y axis on a log scale, or back (a diverged trial flattens the others)."""
        self.log_y = not self.log_y
        self._changed()

    def action_all(self) -> None:
        self.pick = self.node = None
        self._changed()

    def action_back(self) -> None:
        self.app.pop_screen()

    def _changed(self) -> None:
        """A key: the chart asked for is drawn from what the last read built (no file is read, nothing is
        built); when it was not built yet, a worker builds it from the series kept in memory."""
        self._show_title()
        view = self._view()
        ready = self._ready.get((self.metric, view))
        if ready is not None:
            self.on_charts_read(ready)
        else:
            self.read_charts(self.metric, view, False, self._looks())

    def _show_title(self) -> None:
        text = chartsview.title_line(self.run_dir.name, self.metric, self.pick, self.sweep, self.log_y, self.node)
        self.query_one("#charts-title", Static).update(text, layout=False)

    # --- reading ------------------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="charts", exit_on_error=False)
    def read_charts(self, metric: str, view: View, poll: bool, looks: Looks) -> None:
        """``poll``: read what was appended first. Then build ``metric``'s chart of ``view`` if the data changed
        since it was built (posted at once), and the other charts of ``view`` that are missing or more than
        REST_EVERY data versions old, for the keys that will ask for them: a key shows one of those at once,
        a little behind, and the next poll brings it up to date. Charts whose pictures were drawn for another
        size or theme (``looks``) get them drawn again."""
        with self._lock:
            if poll:
                self.polls += 1
                self._status = self._read_status()
                self._version += self._poll(self._status)
            version, built = self._version, self._built_at
            if built.get((metric, view)) == version and self._ready_looks == looks:
                if not poll:  # a key missed it while this worker's last run was building it: here it is
                    self.post_message(self._copy(self._ready[(metric, view)]))
                return  # nothing new: the chart on screen (a key drew it from _ready) is still right
            # kept: the charts of this size (other picks and scales too)
            ready = {k: v for k, v in self._ready.items() if k[1].width == view.width and k[1].height == view.height}
            for m in (metric, *(m for m in chartsview.METRICS if m != metric)):
                key = (m, view)
                age = version - built[key] if key in built and key in ready else None
                if age is None or (age > 0 and m == metric) or age >= REST_EVERY:
                    ready[key], built[key] = self._build(m, view, looks), version
                elif self._ready_looks != looks:
                    ready[key] = self._redrawn(ready[key], looks)
                else:
                    continue
                if m == metric:
                    self.post_message(ready[key])
            self._ready, self._ready_looks, self._built_at = ready, looks, {k: built[k] for k in ready}

    def _read_status(self):
        from cockpit.run.store import read_status

        return read_status(self.run_dir)

    def _poll(self, status) -> int:
        """Bring the series up to date; 1 when points arrived (a sweep: always, its trials come and go)."""
        from cockpit.run.store import is_sweep

        if status is not None and is_sweep(status):
            from cockpit.insight.sweep_series import SweepSeries

            if self._sweep_series is None:
                self._sweep_series = SweepSeries(self.run_dir, keep=CHART_POINTS)
            self._sweep_series.poll(status)
            return 1
        from cockpit.plot.source import RunSeries

        if self._run_series is None:
            self._run_series = RunSeries(self.run_dir, keep=CHART_POINTS)
        return 1 if self._run_series.poll() else 0

    def _build(self, metric: str, view: View, looks: Looks) -> ChartsRead:
        self.builds += 1
        if self._sweep_series is not None:
            read = self._read_sweep(metric, view.pick, view.width, view.height, view.log_y)
        else:
            read = self._read_run(self._status, metric, view.pick, view.width, view.height, view.log_y, view.node)
        return self._redrawn(read, looks)

    @staticmethod
    def _copy(read: ChartsRead) -> ChartsRead:
        """The same read as a new message (a message is posted once)."""
        out = ChartsRead(read.metric, read.pick, read.chart, read.ids, read.gpus, read.sweep, read.local)
        out.drawn, out.ready, out.node, out.nodes = read.drawn, read.ready, read.node, read.nodes
        return out

    @staticmethod
    def _redrawn(read: ChartsRead, looks: Looks) -> ChartsRead:
        """``read`` with its chart's picture drawn for ``looks`` (a new message: the old one may be in use)."""
        out = ChartsRead(read.metric, read.pick, read.chart, read.ids, read.gpus, read.sweep, read.local)
        out.node, out.nodes = read.node, read.nodes
        paint = None
        if looks.plot is not None and isinstance(read.chart, LineChart) and read.chart.lines:
            out.drawn, paint = prerender(read.chart, *looks.plot), looks.plot_paint
        elif isinstance(read.chart, HeatChart):
            out.drawn, paint = (looks.heat, heat_text(read.chart, looks.heat)), looks.heat_paint
        if out.drawn is not None and paint is not None and paint.width:
            out.ready = prepare(out.drawn[1], paint)
        return out

    def _read_run(self, status, metric: str, pick: int | None, width: int, height: int,
                  log_y: bool, node: str | None = None) -> ChartsRead:
        import time

        from cockpit.plot import chart as charts
        from cockpit.plot.source import run_clock

        source = self._run_series
        if source is None:
            return ChartsRead(metric, pick, None, [], None, False)
        series = source.series()
        ids = [s.rank for s in series]
        hosts = self._rank_hosts(ids)
        if metric == "gpu":
            from cockpit.launch import registry

            launcher = registry.known_for_run(status) if status is not None else None
            local = launcher is not None and launcher.runs_here
            return ChartsRead(metric, pick, None, ids, self._gpus(status), False, local)
        ranks = None if pick is None else [pick]
        if node is not None:
            ranks = [r for r in ids if hosts.get(r) == node]
        beats = source.beats(ranks) if metric == "wait" else ()
        ended = source.ended()  # also where a final run's time axis ends: its ranks' exits
        until, quiet = run_clock(status, time.time(), ended)
        chart = charts.build(metric, charts.pick(series, ranks), self.run_dir.name, width, height, beats, ended,
                             log_y=log_y, span=source.span(), until=until, quiet=quiet, hosts=hosts)
        if isinstance(chart, LineChart) and not chart.lines and (unread := source.skipped()):
            # what was found and not read (TensorBoard event files without the package): said with the note
            chart = replace(chart, note=chart.note + "".join(f"\n{path}: {why}" for path, why in unread))
        read = ChartsRead(metric, pick, chart, ids, None, False)
        read.node, read.nodes = node, chartsview.node_order(hosts, status)
        return read

    def _rank_hosts(self, ids: list[int]) -> dict[int, str]:
        """rank -> host, from the run's log files; read again when ranks appear (worker thread)."""
        if set(ids) - self._hosts.keys():
            from cockpit.run import layout

            self._hosts = {rank: host for rank, (host, _) in layout.rank_files(self.run_dir, "log").items()}
        return self._hosts

    def _read_sweep(self, metric: str, pick: int | None, width: int, height: int, log_y: bool) -> ChartsRead:
        from cockpit.insight.sweep_series import sweep_chart

        assert self._sweep_series is not None
        trials = self._sweep_series.trials(0)
        ids = [row.index for row, _ in trials]
        if metric == "gpu":
            return ChartsRead(metric, pick, None, ids, None, True)
        chosen = [(row, s) for row, s in trials if pick is None or row.index == pick]
        return ChartsRead(metric, pick, sweep_chart(metric, chosen, self.run_dir.name, width, height, log_y), ids,
                          None, True)

    def _gpus(self, status) -> chartsview.GpuMap | None:
        """rank -> (host, GPU index); None for a job that uses no GPUs."""
        from cockpit.insight.forecast_inputs import job_spec
        from cockpit.run import layout

        if self._spec is None:
            self._spec = job_spec(self.run_dir) or False
        spec = self._spec or None
        if spec is not None and not spec.uses_gpus:
            return None
        hosts = {rank: host for rank, (host, _) in layout.rank_files(self.run_dir, "log").items()}
        if not hosts and status is not None:  # no logs here (yet): the watchdog's record of each rank
            hosts = {int(r): rec.host for r, rec in status.progress.items() if r.isdigit() and rec.host}
        return chartsview.rank_gpus(hosts, spec.gpu_ids if spec is not None else None)

    # --- drawing ------------------------------------------------------------------------------------------------
    def on_charts_read(self, message: ChartsRead) -> None:
        if (message.metric, message.pick, message.node) != (self.metric, self.pick, self.node):
            return  # a read for a chart no longer asked for; the one asked for is on its way
        self.ids, self.nodes = message.ids, message.nodes or self.nodes
        chart = message.chart
        if self._first and message.metric == "loss" and message.ids and isinstance(chart, LineChart) \
                and not chart.lines:
            self._first = False  # a script that records no loss (a plain one: the hook's beats) has a rate
            self.metric = "rate"
            self._changed()
            return
        if message.sweep != self.sweep:
            self.sweep = message.sweep
            self._show_title()
        charts = self._gpu_charts(message) if message.metric == "gpu" else (message.chart,)
        key = (message.metric, message.pick, charts, message.node)
        if key == self.shown:
            return  # nothing new: no repaint (a finished run polls the same points every second)
        self.shown = key
        self._draw(charts, message.drawn, message.ready)

    def _set_layout(self, heat: bool, empty: bool, two: bool) -> None:
        """The screen's classes that pick the widgets shown (app.tcss), the styles then updated for the body
        only: those classes' rules select nothing else, and restyling the whole screen (footer keys and all)
        on a key cost ~10 ms of the UI thread."""
        before = set(self.classes)
        self.set_class(heat, "-heat", update=False)
        self.set_class(empty, "-empty", update=False)
        self.set_class(two, "-two", update=False)
        if set(self.classes) != before:
            self.app.update_styles(self.query_one("#charts-body"))

    def _gpu_charts(self, message: ChartsRead) -> tuple[LineChart, ...]:
        title = self.run_dir.name
        if message.gpus is None:
            why = "the sweep's trials each have their own: open a trial's run" if message.sweep else "CPU-only run"
            return (LineChart(f"{title}: GPU per rank", "seconds", "%", (), f"{chartsview.NO_GPU} ({why})"),)
        history = self.capp.history
        local = tuple(getattr(self.capp.ctx.fleet, "local_names", ())) if message.local else ()
        gpus = chartsview.fleet_hosts(message.gpus, lambda h, i: bool(history.times(h, i)), local)
        chosen = {r: g for r, g in gpus.items() if self.pick is None or r == self.pick}
        width = self.query_one("#charts-body").size.width
        util = {r: (history.times(*g), history.util(*g)) for r, g in chosen.items()}
        mem = {r: (history.times(*g), history.memory(*g)) for r, g in chosen.items()}
        return (chartsview.gpu_chart(util, chosen, title, "utilisation", width),
                chartsview.gpu_chart(mem, chosen, title, "memory", width))

    def _draw(self, charts: tuple, drawn: tuple | None = None, ready: Ready | None = None) -> None:
        first = charts[0]
        heat = isinstance(first, HeatChart)
        empty = not heat and not first.lines
        self._set_layout(heat, empty, len(charts) > 1 and not empty)
        note = self.query_one("#charts-note", Static)
        text = f"{first.title}\n{first.note}" if empty else ""
        if str(note.content) != text:  # an update lays the screen out again: not on every chart drawn
            note.update(text)
        if heat:
            self.query_one(HeatMap).show(first, drawn, ready)
            self.call_after_refresh(self._note_heat)
            return
        if empty:
            return
        for plot, chart in zip(self.query(ChartPlot), charts, strict=False):
            plot.show(chart, *((drawn, ready) if len(charts) == 1 else (None, None)))
        if len(charts) == 1:
            self.call_after_refresh(self._note_solo)

    def _note_solo(self) -> None:
        """chart-a's size alone: what the worker draws the next line charts for."""
        size = self.query_one("#chart-a", ChartPlot).size
        if size.width and size.height and not any(self.has_class(c) for c in ("-two", "-heat", "-empty")):
            self._solo = (size.width, size.height)

    def _note_heat(self) -> None:
        """The heat map's content width shown: what the worker prepares its strips for."""
        size = self.query_one(HeatMap).size
        if size.width and size.height and self.has_class("-heat"):
            self._heat_seen = size.width
