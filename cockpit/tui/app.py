"""The cockpit TUI: `cockpit` with no command (``run_tui``), or `python -m cockpit.tui`.

Three modes (fleet, compose, runs), each a screen stack; the run view is pushed on top of runs. The app owns
what several screens share: the fleet's nodes and history (fed by one async worker over cockpit.fleet.probes), the
GPU selection (Fleet writes it, Compose reads it), and the theme (themes/*.yaml, remembered in the user
config). Screens subscribe to the app's signals; workers post messages; nothing does IO in a handler.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.signal import Signal
from textual.worker import Worker

from cockpit.fleet.records import NodeReport
from cockpit.tui.messages import FleetUpdated
from cockpit.tui.models import fleet as fleetview
from cockpit.tui.models import gpu_history as gpuhistory
from cockpit.tui.models.context import Context
from cockpit.tui.screens.base import CockpitAppLike, report_worker_error
from cockpit.tui.screens.compose import ComposeScreen
from cockpit.tui.screens.dialogs import Dialog, UnsavedScreen
from cockpit.tui.screens.fleet import FleetScreen
from cockpit.tui.screens.help import HelpScreen
from cockpit.tui.screens.run_view import RunViewScreen
from cockpit.tui.screens.runs import RunsScreen

MODE_KEYS = (("fleet", "Fleet", "nodes and GPUs"), ("compose", "Compose", "the job form"),
             ("runs", "Runs", "every run and its logs"))


def mode_bindings() -> list[Binding]:
    """F2-F4 switch modes from every screen (priority: before a focused widget, and over the run view's
    dialogs such as stacks or evidence); 1-3 too, where no text field takes the digit."""
    out = []
    for i, (mode, title, what) in enumerate(MODE_KEYS):
        out.append(Binding(f"f{i + 2}", f"go('{mode}')", f"{title}: {what}", show=False, priority=True))
        out.append(Binding(f"{i + 1}", f"go('{mode}')", f"{title}: {what}", show=False))
    return out


class CockpitApp(App):
    TITLE = "cockpit"
    CSS_PATH = "app.tcss"
    MODES = {"fleet": FleetScreen, "runs": RunsScreen}  # and compose: see _new_compose
    # ctrl+q quits everywhere (textual's own binding, priority); q where no text field takes the letter.
    # Help lists each key where it works (it reads the live bindings), and both ask before dropping edits.
    BINDINGS = [
        Binding("f1,question_mark", "help", "Help"),
        *mode_bindings(),
        Binding("q", "quit", "Quit", show=False),
    ]

    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx
        self.nodes: list[NodeReport] = []
        self.history = gpuhistory.History()
        self.selection = fleetview.Selection()
        self.fleet_changed: Signal[None] = Signal(self, "fleet-changed")
        self.selection_changed: Signal[None] = Signal(self, "selection-changed")
        self.startup_notes: list[str] = []
        self._setup_themes()
        self.compose_screen: ComposeScreen | None = None  # once shown; quitting asks it for unsaved edits
        self.add_mode("compose", self._new_compose)

    # --- themes ------------------------------------------------------------------------------------------------
    def _setup_themes(self) -> None:
        from cockpit.tui.models.config import load_config
        from cockpit.tui.themes import DEFAULT_THEME, load_themes

        themes, errors = load_themes(self.ctx.theme_dirs)
        self.startup_notes += errors
        if themes:  # cockpit's themes only: colours live in themes/
            for name in list(self.available_themes):
                self.unregister_theme(name)
            for theme in themes:
                self.register_theme(theme)
        settings, problem = load_config(self.ctx.config_path)
        if problem:
            self.startup_notes.append(problem)
        wanted = self.ctx.theme or settings.get("theme") or DEFAULT_THEME
        if wanted not in self.available_themes and f"cockpit-{wanted}" in self.available_themes:
            wanted = f"cockpit-{wanted}"  # --theme light: the short name
        if wanted in self.available_themes:
            self.theme = wanted
        elif themes:
            self.startup_notes.append(f"theme {wanted!r} is not available; using {themes[0].name} (themes: "
                                      f"{', '.join(t.name for t in themes)})")
            self.theme = themes[0].name

    def watch_theme(self, name: str) -> None:
        if self.is_running:
            self.save_theme(name)

    @work(thread=True, exclusive=True, group="config", exit_on_error=False)
    def save_theme(self, name: str) -> None:
        from cockpit.tui.models.config import save_config

        save_config({"theme": name}, self.ctx.config_path)

    # --- start ---------------------------------------------------------------------------------------------
    def on_mount(self) -> None:
        self.call_after_refresh(gc.freeze)  # the first screen's objects live as long as the app: never scan them
        self.switch_mode("fleet")
        self.follow_fleet()
        if self.ctx.run is not None:
            self.open_run(self.ctx.run)
        for note in self.startup_notes:
            self.notify(note, title="cockpit", severity="warning", timeout=15)

    @work(exclusive=True, group="fleet", exit_on_error=False)
    async def follow_fleet(self) -> None:
        def publish(nodes: list[NodeReport]) -> None:
            self.history.record(nodes, self.ctx.clock())  # every reading; only redraws coalesce
            self.post_message(FleetUpdated(nodes))

        await self.ctx.fleet.run(publish)

    def on_fleet_updated(self, message: FleetUpdated) -> None:
        self.nodes = message.nodes
        self.fleet_changed.publish(None)

    def set_selection(self, selection: fleetview.Selection) -> None:
        self.selection = selection
        self.fleet_changed.publish(None)
        self.selection_changed.publish(None)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_worker_error(self, event)

    # --- navigation ----------------------------------------------------------------------------------------
    def open_run(self, run_dir: Path) -> None:
        """Show a run's view on top of the runs list."""
        self.switch_mode("runs")
        if isinstance(self.screen, RunViewScreen):
            if self.screen.run_dir == run_dir:
                return
            self.pop_screen()
        ctx = self.ctx
        self.push_screen(RunViewScreen(run_dir, ctx.max_lines, ctx.parse_budget, ctx.scan_slice))

    def _new_compose(self) -> ComposeScreen:
        self.compose_screen = ComposeScreen()
        return self.compose_screen

    def action_go(self, mode: str) -> None:
        """Switch mode; a help screen shown over this one closes first (it described this screen)."""
        if isinstance(self.screen, HelpScreen):
            self.pop_screen()
        self.switch_mode(mode)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A dialog waits for its answer: the mode keys do not act meanwhile (quit does, and asks)."""
        return not (action == "go" and self.screen_stack and isinstance(self.screen_stack[-1], Dialog))

    async def action_quit(self) -> None:
        """Quit; first ask to save, discard or stay when Compose holds edits that are not saved."""
        compose = self.compose_screen
        if compose is None or not compose.unsaved():
            self.exit()
        elif not isinstance(self.screen, UnsavedScreen):  # asked already: the question is on screen
            self.ask_quit(compose)

    @work(group="quit", exit_on_error=False)
    async def ask_quit(self, compose: ComposeScreen) -> None:
        name = compose.form.name.strip() or "job"
        where = f"{compose.job_path.name} has" if compose.job_path else f"the new job {name!r} has"
        answer = await self.push_screen_wait(UnsavedScreen(f"Quit? In Compose, {where} edits that are not "
                                                           "saved."))
        if answer == "discard":
            self.exit()
        elif answer == "save":
            self.action_go("compose")
            if await compose.save():
                self.exit()

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        where = getattr(self.screen, "TITLE", None) or "cockpit"
        self.push_screen(HelpScreen(where, self.screen.active_bindings))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        for mode, title, what in MODE_KEYS:
            yield SystemCommand(f"Go to {title}", f"Show {what}", lambda m=mode: self.switch_mode(m))
        yield SystemCommand("Help", "Show the key bindings", self.action_help)
        for name in sorted(self.available_themes):
            yield SystemCommand(f"Theme: {name}", "Switch to this theme (remembered)",
                                lambda n=name: setattr(self, "theme", n), discover=False)
        actions = getattr(screen, "BINDINGS", [])
        for b in actions:
            if isinstance(b, Binding) and b.description:
                yield SystemCommand(f"{getattr(screen, 'TITLE', '')}: {b.description}", f"key {b.key}",
                                    lambda a=b.action, s=screen: self.run_action(a, s))
        yield from super().get_system_commands(screen)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="cockpit [tui]",
                                description="The cockpit terminal UI (`cockpit` with no command).")
    p.add_argument("--nodes", metavar="LIST", help="hostlist to show in Fleet (default: the cluster file's "
                   "hosts, else this machine)")
    p.add_argument("--job", metavar="JOB.yaml", help="open this job file in Compose")
    p.add_argument("--run", metavar="RUN", help="open this run's view (run id, unique prefix, last, or a path)")
    p.add_argument("--runs-dir", help="where runs live (default: $COCKPIT_RUNS_DIR or $XDG_STATE_HOME/cockpit/runs)")
    p.add_argument("--theme", help="theme for this session (the palette's Theme commands remember one)")
    p.add_argument("--interval", type=float, default=2.0, help="fleet refresh seconds (default 2)")
    return p.parse_args(argv)


def build_context(args: argparse.Namespace) -> Context:
    from cockpit.fleet import probes as fleet
    from cockpit.fleet.cluster import load_cluster
    from cockpit.fs.paths import default_runs_dir
    from cockpit.remote import RemotePool, SSHOptions
    from cockpit.run.store import resolve_run
    from cockpit.tui.models.context import default_requeue, default_user_jobs
    from cockpit.tui.models.fleet_feed import LiveFleet

    runs_dir = Path(args.runs_dir) if args.runs_dir else default_runs_dir()
    run = resolve_run(runs_dir, args.run) if args.run else None
    cluster = load_cluster()
    if args.nodes:
        hosts = fleet.expand_hostlist(args.nodes, fleet.scontrol_hostnames())
    else:
        hosts = list(cluster.hosts) if cluster and cluster.hosts else ["localhost"]
    pool = RemotePool(cluster.ssh if cluster else SSHOptions())
    feed = LiveFleet(hosts, pool, interval=args.interval, python=cluster.python if cluster else "python3")
    return Context(runs_dir=runs_dir, fleet=feed, job=Path(args.job) if args.job else None, run=run,
                   theme=args.theme, requeue=default_requeue(),
                   user_jobs=default_user_jobs())


def run_tui(argv: list[str] | None = None) -> int:
    """Open the TUI; returns the exit code (2 for a bad cluster file, node list or run)."""
    from cockpit.fleet.cluster import NodesError
    from cockpit.run.store import RunNotFound

    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        ctx = build_context(args)
    except (NodesError, RunNotFound) as exc:
        print(f"cockpit: {exc}", file=sys.stderr)
        return 2
    tune_for_latency()
    CockpitApp(ctx).run()
    return 0


def tune_for_latency() -> None:
    """Interpreter settings for an interactive process that also digests a log storm in a thread:
    - never scan what exists at start (modules, classes, the first screen) in garbage collections, and run
      full collections ten times less often: with 64 ranks writing they ran every second and took 30-90 ms
      each, and a key press landing on one waited for it;
    - a young collection after 20,000 net new container objects instead of 700: under a log storm every
      batch (thousands of line objects alive for a moment) set one off, ~100 a second, and promoted the batch
      to the middle generation, whose collections (~9 a second, up to 50 ms) then scanned it; measured in the
      TUI bench: ~3 s of collections in 30 s before, 0.2 s after;
    - hand the GIL over every 2 ms instead of 5, so the UI thread gets it soon after a key arrives."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 10, 100)  # young: 20,000 (see above); a full collection 10x less often
    sys.setswitchinterval(0.002)


if TYPE_CHECKING:  # mypy checks that the app has all its screens read of it (screens/base.py's protocol)
    def _screens_see(app: CockpitApp) -> CockpitAppLike:
        return app
