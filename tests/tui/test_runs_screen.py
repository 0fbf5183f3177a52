"""Runs and the run view over finished run directories (the logs of a real failed demo run): the list, the
merged and per-rank logs, level filter and search, the diagnosis with its evidence, per-rank exits; help,
the command palette and themes."""

from __future__ import annotations

from helpers import REPO
from tui.tuidata import until

from cockpit.tui.app import CockpitApp
from cockpit.tui.models.config import load_config
from cockpit.tui.screens.evidence import EvidenceScreen
from cockpit.tui.screens.help import HelpScreen
from cockpit.tui.screens.run_view import RunViewScreen
from cockpit.tui.screens.runs import RunsScreen
from cockpit.tui.widgets.rank_log import RankLog


async def open_failed_run(app, pilot) -> RunViewScreen:
    await pilot.press("f4")
    await until(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.runs, what="the runs list")
    table = app.screen.query_one("#runs-table")
    assert [str(table.get_row_at(i)[1]) for i in range(3)] == ["failed", "succeeded", "stopped"]  # newest first
    assert [str(c) for c in table.get_row_at(0)][2:] == ["-", "10m", "2", "local", "node0"]  # HEALTH: ended
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, RunViewScreen), what="the run view")
    view = app.screen
    await until(pilot, lambda: view.report is not None and view.status is not None, what="the diagnosis")
    return view


async def test_runs_run_view_help_and_themes(ctx, runs):
    app = CockpitApp(ctx)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await open_failed_run(app, pilot)
        log = view.query_one(RankLog)
        merged = list(log.lines)
        assert "[node0:1] [rank1]: RuntimeError: injected failure on rank 1 after step 5 (--fail-mode raise)" in merged
        assert any(line.startswith("[node0:agent] Root Cause") for line in merged)
        ranks = view.query_one("#ranks")
        assert [str(ranks.get_row_at(i)[0]) for i in range(ranks.row_count)] == [
            "all ranks", "node0:0", "node0:1", "node0:agent"]
        assert [str(ranks.get_row_at(i)[4]) for i in (1, 2)] == ["143", "1"]  # ST: the exit code once ended
        await pilot.press("l", "l")  # errors only; the feed process answers a view change a moment later
        assert view.filter.level == "error"
        await until(pilot, lambda: 0 < len(log.lines) < len(merged), what="the errors-only view")
        assert all("error" in line.lower() or "fail" in line.lower() or "exitcode" in line.lower()
                   or "traceback" in line.lower() for line in log.lines)
        await pilot.press("l", "l", "slash")
        await pilot.press(*"injecting")
        await pilot.press("enter")
        await until(pilot, lambda: list(log.lines) == ["[node0:1] [demo] rank 1: injecting failure 'raise' after "
                                                       "step 5"], what="the search's one line")
        await pilot.press("slash", "escape")
        await until(pilot, lambda: len(log.lines) == len(merged), what="the merged view again")
        ranks.focus()
        await pilot.press("down", "down")  # rank 1 alone, without prefixes
        await until(pilot, lambda: view.view == ("node0", 1))
        await until(pilot, lambda: log.lines and log.lines[-1] == "[rank1]: RuntimeError: injected failure on "
                    "rank 1 after step 5 (--fail-mode raise)", what="rank 1's lines")
        codes = [f.code for f in view.report.findings]
        assert "worker_failed" in codes or any("First failure" in f.title for f in view.report.findings)
        findings = view.query_one("#findings")
        findings.focus()
        findings.highlighted = 0
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, EvidenceScreen) and app.screen.items, what="evidence")
        context = str(app.screen.query_one("#evidence-context").content)
        assert "▶" in context
        await pilot.press("g")
        await until(pilot, lambda: app.screen is view)
        await until(pilot, lambda: not view.follow, what="the evidence line, follow paused")
        assert view.view is not None
        await pilot.press("a")
        assert view.view is None
        await until(pilot, lambda: len(log.lines) == len(merged), what="the merged view again")

        # an ended run cannot be stopped; requeue is for Slurm runs only; help lists the screen's keys
        assert not view.check_action("stop", ()) and not view.check_action("requeue", ())
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        keys = app.screen.query_one("#help-keys")
        described = {str(keys.get_row_at(i)[1]) for i in range(keys.row_count)}
        assert {"Back", "Follow", "Search", "Level", "Diagnose", "Help"} <= described
        await pilot.press("escape", "escape")
        assert isinstance(app.screen, RunsScreen)

        # themes: switched from the command palette, remembered for the next start
        assert app.theme == "cockpit-dark"
        await pilot.press("ctrl+p")
        await until(pilot, lambda: app.screen.query("CommandInput"), what="the command palette")
        app.screen.query_one("CommandInput").value = "Theme: cockpit-light"
        await until(pilot, lambda: app.screen.query_one("CommandList").option_count > 0, what="the matches")
        await pilot.press("enter")
        await until(pilot, lambda: app.theme == "cockpit-light", what="the light theme")
        await until(pilot, lambda: load_config(ctx.config_path)[0] == {"theme": "cockpit-light"},
                    what="the remembered theme")
    again = CockpitApp(ctx)
    assert again.theme == "cockpit-light"


async def test_a_bad_theme_is_reported_and_skipped(ctx, tmp_path):
    bad = tmp_path / "mythemes"
    bad.mkdir()
    (bad / "pink.yaml").write_text("name: pink\ncolors: {primary: not-a-colour}\n")
    # colours fine, but a variable textual's stylesheet parser would stop the app on: reported and skipped too
    (bad / "teal.yaml").write_text("name: teal\ncolors: {primary: '#008080'}\n"
                                   "variables: {footer-key-foreground: zzz notacolour}\n")
    ctx.theme_dirs = [REPO / "themes", bad]
    ctx.theme = "pink"
    app = CockpitApp(ctx)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: len(app._notifications) >= 3, what="the three startup notes")  # shown 15 s
        notes = [n.message for n in app._notifications]
        assert any("pink.yaml: colors.primary: 'not-a-colour' is not a colour" in n for n in notes)
        assert any("theme 'pink' is not available" in n and "(themes: cockpit-" in n for n in notes), notes
        assert app.theme in ("cockpit-dark", "cockpit-light") and "pink" not in app.available_themes
        assert any("teal.yaml: variables.footer-key-foreground: 'zzz notacolour' is not a colour" in n
                   for n in notes) and "teal" not in app.available_themes


async def test_a_themes_short_name_is_taken(ctx):
    ctx.theme_dirs, ctx.theme = [REPO / "themes"], "light"  # --theme light: cockpit-light
    app = CockpitApp(ctx)  # the theme is chosen as the app is made (its startup notes are shown once it runs)
    async with app.run_test(size=(80, 24)):
        assert app.theme == "cockpit-light" and not app.startup_notes, app.startup_notes


async def test_runs_screen_lists_the_users_slurm_jobs_below_the_runs(ctx, runs):
    """Jobs from real squeue output (tests/slurm/fixtures/squeue-user-jobs.txt), injected as Context.user_jobs:
    one row per job, an array as one row with its tasks counted; 80x24 keeps both tables on screen."""
    from dataclasses import replace

    from cockpit.slurm.jobs import parse_squeue

    text = (REPO / "tests/slurm/fixtures/squeue-user-jobs.txt").read_text()
    lines = "".join(ln for ln in text.splitlines(keepends=True) if not ln.startswith("#"))
    app = CockpitApp(replace(ctx, user_jobs=lambda: parse_squeue(lines)))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f4")
        await until(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.jobs, what="the jobs list")
        table = app.screen.query_one("#jobs-table")
        assert table.display and table.row_count == 5
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(5)]
        assert rows[1][:3] == ["12904_*", "arr", "FAILED (NonZeroExitCode)"]
        assert rows[1][5] == "3 tasks: 2 failed, 1 completed"
        assert rows[4][2] == "PENDING (JobHeldUser)"
        assert app.screen.query_one("#runs-table").region.height >= 5  # the runs stay usable at 80x24
        table.focus()
        await pilot.press("enter")
        await until(pilot, lambda: any("cockpit logs -f 12903" in n.message for n in app._notifications),
                    what="the note on the job's output")  # shown 8 s


async def test_at_80x24_the_runs_health_and_the_run_views_first_keys_are_on_screen(ctx, runs):
    """Issue 33 item 7c: HEALTH stands next to STATE, so the longest health a run can have (a frozen
    supervisor's) is on screen at 80 columns: whole as far as LAUNCHER, after it, leaves room (then cut with "…",
    its kind first: issue 33's Runs layout keeps LAUNCHER whole); the run view's footer shows Stop, Fix and Help
    there (~2 s)."""
    from textual.widgets._footer import FooterKey

    from cockpit.run.store import read_status
    from cockpit.tui.messages import RunsListed

    app = CockpitApp(ctx)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f4")
        await until(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.runs, what="the runs list")
        screen, table = app.screen, app.screen.query_one("#runs-table")
        live = read_status(runs[0])
        live.state = "running"
        screen.post_message(RunsListed([(runs[0], live)], {runs[0]: (123456, "T")}))
        await until(pilot, lambda: table.row_count == 1, what="the frozen run listed")
        health = str(table.get_row_at(0)[2])
        assert health.startswith("frozen: supervisor") and health.endswith("…"), health
        assert [str(c) for c in table.get_row_at(0)][5] == "local"
        widths = [col.get_render_width(table) for col in table.ordered_columns]
        assert sum(widths[:6]) <= table.scrollable_content_region.width, widths  # RUN to LAUNCHER on screen
        screen.reload()
        await until(pilot, lambda: table.row_count == 3, what="the runs listed again")
        view = await open_failed_run(app, pilot)
        await pilot.pause()
        shown = {key.action: key.region for key in view.query(FooterKey)}
        palette = next(key.region for key in view.query(FooterKey) if key.has_class("-command-palette"))
        for action in ("back", "stop", "fix", "diagnose", "app.help"):
            assert shown[action].width and shown[action].right <= palette.x, (action, shown[action], palette)


async def test_the_runs_footer_says_how_to_open_a_run(ctx, runs):
    """The focused table's own enter (Select, hidden) hid the screen's `enter Open`: at 80x24 and 120x36 the footer
    said only `g Refresh  f1 Help` (issue 33's new-user pass). The key the footer shows opens the run."""
    app = CockpitApp(ctx)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f4")
        await until(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.runs, what="the runs list")
        shown = app.screen.active_bindings["enter"].binding
        assert (shown.description, shown.show) == ("Open", True)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunViewScreen), what="the run view")


async def test_at_80x24_the_log_has_the_width_and_a_progress_line_shows_its_loss(ctx, runs):
    """Issue 33's new-user pass: beside the side panel the log was 42 columns at 80x24, and a progress line's
    loss= was off its right edge. Under 100 columns the rank table and the sparklines go under the log, which
    has the whole width; from 100 they stand beside it again, as the terminal is resized."""
    from cockpit.tui.widgets.rank_table import RankTable

    app = CockpitApp(ctx)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f4")
        await until(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.runs, what="the runs list")
        await pilot.press("down", "enter")  # the run that succeeded: its ranks printed progress lines
        await until(pilot, lambda: isinstance(app.screen, RunViewScreen), what="the run view")
        view = app.screen
        log = view.query_one(RankLog)
        await until(pilot, lambda: any("loss=" in t for t in log.lines), what="a progress line in the log")
        line = next(t for t in log.lines if "loss=" in t)
        ranks = view.query_one(RankTable)
        assert view.has_class("-narrow")
        assert log.scrollable_content_region.width >= len(line) > 42, (log.region, line)
        assert ranks.region.y >= log.region.bottom and ranks.region.height >= 4, (ranks.region, log.region)
        await pilot.resize_terminal(120, 36)
        await until(pilot, lambda: not view.has_class("-narrow") and ranks.region.right <= log.region.x,
                    what="the side panel beside the log at 120 columns")


async def test_the_runs_list_is_refreshed_while_seen_and_on_return_not_under_a_run_view(ctx, runs):
    """Under a run's view the runs list is not seen: its periodic refresh (every run's status.json read) waits
    for the list to show again (issue 32: at 4,096 ranks one read held the interpreter ~40 ms every 2 s)."""
    from dataclasses import replace

    from tui.tuidata import NOW, make_run

    app = CockpitApp(replace(ctx, runs_every=0.05))
    async with app.run_test(size=(120, 36)) as pilot:
        await open_failed_run(app, pilot)
        runs_screen = next(s for s in app.screen_stack if isinstance(s, RunsScreen))
        await until(pilot, lambda: runs_screen._stale, what="a refresh due under the run view")
        new = make_run(ctx.runs_dir, "later", "succeeded", NOW - 60)
        runs_screen._stale = False
        await until(pilot, lambda: runs_screen._stale, what="a refresh due after the new run")
        assert len(runs_screen.runs) == len(runs)  # not read while covered
        assert new.name not in [d.name for d, _ in runs_screen.runs]
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is runs_screen)
        await until(pilot, lambda: any(d.name == new.name for d, _ in runs_screen.runs), what="the new run listed")
        assert not runs_screen._stale
