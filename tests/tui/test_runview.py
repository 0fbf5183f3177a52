"""The run view's decisions and words without a screen (cockpit.tui.models.run_view): the apply pace, the title line,
the findings panel's rows and what selecting one shows, the plotted rank, where an evidence line is."""

from __future__ import annotations

from cockpit.hang.finding import straggler_finding
from cockpit.hang.progress import Straggler
from cockpit.logs.diagnose.model import Finding, Report
from cockpit.run.findings import LiveFinding
from cockpit.run.store import RunStatus
from cockpit.tui.models import run_view as runview
from cockpit.tui.models.feed_state import LiveEvent
from cockpit.tui.models.log_filter import LineFilter
from cockpit.tui.models.log_store import MERGED

SRC = ("gpu-a", 1)
STRAGGLER = LiveFinding.from_dict(straggler_finding(Straggler(rank=1, host="gpu-a", compute_ms=120.0,
                                                              others_wait_ms=90.0, wait_share=0.05,
                                                              others_share=0.4)))
REPORT = Report(files=(), findings=(Finding("error", "nccl_timeout", "NCCL timed out", "raise the timeout",
                                            (("logs/rank-1.log", 7),)),))
EVENT = LiveEvent(SRC, "oom", "CUDA out of memory", 42)


def test_a_storm_batch_slows_the_pace():
    assert runview.apply_every(runview.STORM_LINES) == runview.APPLY_EVERY
    assert runview.apply_every(runview.STORM_LINES + 1) == runview.APPLY_EVERY_STORM > runview.APPLY_EVERY


def test_the_title_says_state_view_filter_follow_and_skips():
    assert runview.title_text(None, MERGED, LineFilter().describe(), True, 0) == \
        f"reading… · all ranks · {LineFilter().describe()} · follow"
    status = RunStatus(run_id="r", name="demo", launcher="ssh", job_file="j.yaml", hosts=["gpu-a"], world_size=2,
                       state="failed", exit_code=1)
    title = runview.title_text(status, SRC, "errors", False, 12)
    assert title == ("failed (exit 1) · ssh · 2 ranks · [gpu-a:1] · errors · paused · "
                     "live scan skipped 12 lines (d: full diagnosis)")


def test_an_ended_runs_all_ranks_says_its_order_is_an_estimate():
    """Issue 33's new-user pass: a log line carries no time (the rank wrapper appends the output as it is), so an
    ended run's merged order is cockpit.tui.models.log_order's estimate, and the title says so; live, it does not
    (lines show as read). At 80 columns the default filter's words make room for it."""
    status = RunStatus(run_id="r", name="demo", launcher="local", job_file="j.yaml", hosts=["vm"], world_size=2,
                       state="succeeded", exit_code=0)
    everything = LineFilter().describe()
    title = runview.title_text(status, MERGED, everything, True, 0)
    assert title == f"succeeded (exit 0) · local · 2 ranks · all ranks, order estimated · {everything} · follow"
    narrow = runview.title_text(status, MERGED, everything, True, 0, width=78)
    assert narrow == "succeeded (exit 0) · local · 2 ranks · all ranks, order estimated · follow"
    assert runview.title_text(status, MERGED, "errors", True, 0, width=78).endswith("· errors · follow")
    # one log (a 1-rank run without its agent's) is in its own order: nothing estimated
    one = runview.title_text(status, MERGED, everything, True, 0, width=78, sources=1)
    assert " · all ranks · " in one and "2 ranks" in one
    status.state, status.exit_code = "running", None
    assert " · all ranks · " in runview.title_text(status, MERGED, everything, True, 0, width=78)
    status.world_size = 1
    assert " · 1 rank · " in runview.title_text(status, MERGED, everything, True, 0)


def test_findings_rows_put_hangs_first_then_the_report_or_the_events():
    rows = runview.finding_rows([STRAGGLER], None, [EVENT])
    assert [(r.id, r.style, r.disabled) for r in rows] == [("h0", "bold yellow", False), ("e0", "", False)]
    assert rows[0].text.startswith("STRAGGLER rank 1 (gpu-a) is a straggler")
    assert rows[1].text == "live    [gpu-a:1] oom: CUDA out of memory"
    rows = runview.finding_rows([], REPORT, [EVENT])  # the diagnosis replaces the live events
    assert [(r.id, r.text) for r in rows] == [("f0", "ERROR   NCCL timed out")]
    assert runview.finding_rows([], Report((), ()), []) == [
        runview.FindingRow("diagnosis: no problems found", "none", disabled=True)]
    assert [r.id for r in runview.finding_rows([], None, [])] == ["none"]
    assert runview.finding_rows([STRAGGLER], None, [])[-1].id == "h0"  # no placeholder under a hang finding


def test_a_selected_row_gives_its_title_hint_and_evidence(tmp_path):
    assert runview.finding_detail("f0", [], REPORT, [], tmp_path) == (
        "ERROR NCCL timed out", "raise the timeout", [("logs/rank-1.log", 7)])
    assert runview.finding_detail("e0", [], None, [EVENT], tmp_path) == (
        "oom on [gpu-a:1]", "CUDA out of memory", [(SRC, 42)])
    title, hint, evidence = runview.finding_detail("h0", [STRAGGLER], None, [], tmp_path)
    assert title.startswith("STRAGGLER rank 1") and hint == STRAGGLER.hint and evidence == []  # no log yet
    assert runview.finding_detail("none", [], None, [], tmp_path) is None
    assert runview.finding_detail("h3", [STRAGGLER], None, [], tmp_path) is None  # a row of an older status


def test_the_plot_shows_the_viewed_rank_else_the_first_with_metrics():
    assert runview.metrics_rank(SRC, [0, 1]) == 1
    assert runview.metrics_rank(SRC, [0, 2]) == 0
    assert runview.metrics_rank(MERGED, [3]) == 3
    assert runview.metrics_rank(("gpu-a", "agent"), []) is None


def test_an_evidence_line_in_the_merged_view_and_in_its_own():
    assert runview.evidence_target(SRC, 42, "boom", MERGED, 100, 50) == ("[gpu-a:1] boom", None)
    # the source's view holds its last 50 of 100 lines: line 60 is row 9
    assert runview.evidence_target(SRC, 60, "boom", SRC, 100, 50) == ("boom", 9)
    assert runview.evidence_target(None, 3, None, SRC, None, 50) == (None, None)


def test_a_stalled_runs_forecast_promises_no_end():
    """Issue 33's new-user pass: a stalled live run's line said "9s to go; fits: yes (no time limit)" beside its
    STALL finding (the rate from before the stall); `cockpit ps` says `? no progress` there, so does the view."""
    from cockpit.insight.forecast import Forecast

    status = RunStatus(run_id="r", name="demo", launcher="local", job_file="j.yaml", hosts=["vm"], world_size=2,
                       state="running")
    forecast = Forecast("yes", "no time limit", steps_done=5, total_steps=400, seconds_per_step=0.02,
                        remaining_s=9.0, gpus=0)
    assert runview.forecast_text(forecast, status) == forecast.line() and "to go" in forecast.line()
    status.findings = [LiveFinding(kind="stall", text="no rank made progress")]
    text = runview.forecast_text(forecast, status)
    assert text.startswith("forecast: step 5/400; ? no progress") and "to go" not in text and "fits" not in text
    status.findings = [STRAGGLER]  # a straggler still makes progress: its eta stands
    assert runview.forecast_text(forecast, status) == forecast.line()


def test_a_stopped_runs_title_says_no_exit_code():
    """Issue 33's new-user pass: the TUI's title said `stopped (exit 1)` (torchrun's code after the stop, from its
    SignalException) where `cockpit attach` says exit code 143 and `cockpit run`'s own Ctrl-C 130: a failure that
    did not happen. A stopped run's title says stopped; a failed one keeps its code."""
    status = RunStatus(run_id="r", name="demo", launcher="local", job_file="j.yaml", hosts=["vm"], world_size=2,
                       state="stopped", exit_code=1)
    assert runview.title_text(status, SRC, "errors", True, 0).startswith("stopped · local · 2 ranks · ")
    status.state = "failed"
    assert runview.title_text(status, SRC, "errors", True, 0).startswith("failed (exit 1) · local · ")


async def test_a_following_log_stays_at_its_end_when_the_terminal_shrinks():
    """Issue 33's new-user pass: a run view followed at 120x36 and made 80x24 kept its top line, and its new
    lines scrolled no more (the log was not at its end), while the title said ``follow``."""
    from textual.app import App, ComposeResult

    from cockpit.tui.widgets.rank_log import RankLog

    class Logs(App):
        def compose(self) -> ComposeResult:
            yield RankLog()

    app = Logs()
    async with app.run_test(size=(120, 36)) as pilot:
        log = app.query_one(RankLog)
        log.write_lines([f"step {i} loss=0.1" for i in range(200)])
        await pilot.pause()
        assert log.is_vertical_scroll_end
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.pause()
        assert log.is_vertical_scroll_end, (log.scroll_y, log.max_scroll_y)
        log.write_lines(["step 200 loss=0.1"])
        await pilot.pause()
        assert log.is_vertical_scroll_end  # and it follows on
        log.scroll_home(animate=False, immediate=True)  # someone reading back: a resize leaves them there
        await pilot.resize_terminal(100, 30)
        await pilot.pause()
        assert log.scroll_y == 0


async def test_the_log_keeps_rows_on_a_short_terminal(tmp_path, monkeypatch):
    """At 60x15 the findings (5 rows) and the panel under the log (6) left the log no row at all: a user saw
    the rank table and nothing of what the ranks printed. Under SHORT rows both give some up; at 80x24 the
    layout is the one the snapshots hold."""
    from tui.tuidata import FAILED_LOGS, make_run, until

    from cockpit.tui.app import CockpitApp
    from cockpit.tui.models.context import Context
    from cockpit.tui.models.fleet_feed import FixedFleet
    from cockpit.tui.screens.run_view import RunViewScreen

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    runs = tmp_path / "runs"
    run_dir = make_run(runs, "demo", "failed", 1_700_000_000.0, logs=FAILED_LOGS)
    ctx = Context(runs_dir=runs, fleet=FixedFleet([], local_names=("localhost",)), base_dir=tmp_path,
                  config_path=tmp_path / "config" / "tui.yaml", partitions=lambda: [], runs_every=3600)
    app = CockpitApp(ctx)
    async with app.run_test(size=(60, 15)) as pilot:
        app.push_screen(RunViewScreen(run_dir))
        await until(pilot, lambda: isinstance(app.screen, RunViewScreen) and app.screen.status is not None,
                    what="the run view with its status")
        view = app.screen
        log = view.query_one("#log")
        await until(pilot, lambda: log.region.height >= 4, what="rows for the log at 60x15")
        assert view.has_class("-short") and view.has_class("-narrow")
        assert view.query_one("#findings").region.height == 3 and view.query_one("#run-side").region.height == 4
        await pilot.resize_terminal(80, 24)
        await until(pilot, lambda: not view.has_class("-short"), what="the short layout left at 80x24")
        await pilot.pause()
        assert view.query_one("#findings").region.height == 5 and view.query_one("#run-side").region.height == 6
