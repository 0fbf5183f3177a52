"""Compose: the job form, validated live by cockpit.spec.model, with a preview of exactly what would run.

Every change re-checks the form in an exclusive worker (a newer check cancels an older one, whose result is
dropped); problems appear under the field they belong to and, positioned, next to the job's YAML. Save,
open and launch do their IO in workers too.

Here: the form's rows and widgets, the check and where its problems show, the fleet's selection, launch.
Elsewhere: opening and saving the job file, and unsaved edits (compose_file), the side panel
(widgets/job_preview), the field table and the words as pure functions (cockpit.tui.models.compose)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.suggester import SuggestFromList
from textual.widgets import Checkbox, Footer, Input, Label, Select, Static
from textual.worker import get_current_worker

from cockpit.spec.model import SpecError
from cockpit.tui.messages import Validated
from cockpit.tui.models import compose as composeview
from cockpit.tui.models import form as jobform
from cockpit.tui.models.compose import FIELDS, NODES_PLACEHOLDER, SLURM
from cockpit.tui.models.fleet import job_choice
from cockpit.tui.screens.base import CockpitScreen
from cockpit.tui.screens.compose_file import JobFile
from cockpit.tui.widgets.job_preview import JobPreview
from cockpit.tui.widgets.navbar import NavBar


class ComposeScreen(JobFile, CockpitScreen):
    TITLE = "Compose"
    BINDINGS = [
        Binding("ctrl+l,f5", "launch", "Launch"),
        Binding("ctrl+s", "save", "Save"),
        Binding("ctrl+o", "open", "Open"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.form = jobform.JobForm(name="job", script="train.py")
        self.clean = self.form  # the job as last opened or saved: quitting asks when the form says another
        self.job_path: Path | None = None
        self.checked: jobform.Checked | None = None
        self._choices = {name: list(extra) for name, _, kind, extra in FIELDS + SLURM if kind == "select"}
        self._launching = False

    def compose(self) -> ComposeResult:
        yield NavBar("compose", id="nav")
        with Horizontal(id="compose"):
            with VerticalScroll(id="form"):
                yield from self._rows(FIELDS)
                yield Static("Slurm", classes="section slurm")
                yield from self._rows(SLURM, "slurm")
                yield Static("", id="compose-notes", classes="-none", markup=False)
            yield JobPreview(id="side")
        yield Footer()

    def _rows(self, fields: list, classes: str = "") -> ComposeResult:
        """One line per field; an error line is mounted under a field while it has one (see _show_error)."""
        for name, label, kind, extra in fields:
            value = getattr(self.form, name)
            with Horizontal(classes=f"field {classes}".strip(), id=f"r-{name}"):
                yield Label(label, classes="field-label")
                if kind == "select":
                    options = [(v or "unset", v) for v in extra]
                    yield Select(options, value=value, allow_blank=False, id=f"f-{name}", compact=True)
                elif kind == "checkbox":
                    yield Checkbox("", value=bool(value), id=f"f-{name}", compact=True)
                else:
                    yield Input(value, placeholder=extra, id=f"f-{name}", compact=True)

    def on_mount(self) -> None:
        self.capp.selection_changed.subscribe(self, lambda _: self.use_selection())
        self.load_partitions()
        if self.capp.ctx.job is not None:
            self.open_path(self.capp.ctx.job)
        elif self.capp.selection:
            self.use_selection()
        else:
            self.form_changed()

    # --- form <-> widgets ------------------------------------------------------------------------------------
    def on_input_changed(self, event: Input.Changed) -> None:
        self._set(event.input)

    def on_select_changed(self, event: Select.Changed) -> None:
        self._set(event.select)

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        self._set(event.checkbox)

    def _set(self, widget) -> None:
        """Take the widget's value now, not the event's: an event can be older than a fill() since."""
        if not widget.id or not widget.id.startswith("f-"):
            return
        name, value = widget.id[2:], widget.value
        if getattr(self.form, name) != value:
            self.form = self.form.set(**{name: value})
            self.form_changed()

    def fill(self, form: jobform.JobForm) -> None:
        """Show ``form`` in the widgets, then check it once."""
        self.form = form
        with self.prevent(Input.Changed, Select.Changed, Checkbox.Changed):  # one check for the whole form
            for name in jobform.FIELD_NAMES:
                widget = self.query_one(f"#f-{name}")
                value = getattr(form, name)
                choices = self._choices.get(name)
                if choices is not None and value not in choices:  # the job file says something else: show it
                    choices.append(value)
                    self.query_one(f"#f-{name}", Select).set_options([(v or "unset", v) for v in choices])
                if isinstance(widget, Input | Select | Checkbox):  # every field is one of these
                    widget.value = value
        self.form_changed()

    def form_changed(self) -> None:
        launcher = self.form.launcher
        self.set_class(launcher == "slurm", "-slurm")
        nodes = self.query_one("#f-nodes", Input)
        nodes.disabled = launcher == "local"
        nodes.placeholder = NODES_PLACEHOLDER.get(launcher, "")
        self.query_one(NavBar).info = composeview.shown_path(self.job_path) if self.job_path else "new job (not saved)"
        self.validate(self.form)

    # --- validation and preview (worker) ---------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="validate", exit_on_error=False)
    def validate(self, form: jobform.JobForm) -> None:
        from cockpit.launch import dry_run_facts, with_shell_env

        worker = get_current_worker()
        checked = jobform.check(form, self._label())
        text = "(the preview appears when the job is valid)"
        if checked.spec is not None:
            from cockpit.launch import registry
            from cockpit.preflight.checks import FAIL

            job_path = str(self.job_path or self._base_dir() / "job.yaml")
            here = registry.for_spec(checked.spec).here_checks(checked.spec, job_path)  # a script that is not there
            spec = with_shell_env(checked.spec)  # what an ssh launch from here would export
            checked = jobform.with_here(checked, [c for c in here if c.level == FAIL])
            facts = self.capp.ctx.facts(dry_run_facts(spec, job_path, str(self.capp.ctx.runs_dir)))
            text = composeview.preview_text(spec, facts)
        advice = composeview.interface_advice(checked.spec, form.nccl_socket_ifname.strip(), list(self.capp.nodes))
        if not worker.is_cancelled:
            self.post_message(Validated(checked, text, advice))

    def on_validated(self, message: Validated) -> None:
        self.checked = checked = message.checked
        by_field = checked.by_field()
        for name in jobform.FIELD_NAMES:
            self._show_error(name, composeview.field_error(by_field.get(name, [])))
        self._show_note("advice", message.advice, after="nccl_socket_ifname")
        self.query_one(JobPreview).show(composeview.summary(checked), checked.spec is not None,
                                        message.preview, checked.text)

    def _show_note(self, name: str, text: str, after: str) -> None:
        found = self.query(f"#n-{name}")
        if not text:
            found.remove()
        elif found:
            found.first(Static).update(text)
        else:
            self.query_one("#form").mount(Static(text, id=f"n-{name}", classes="field-note", markup=False),
                                          after=self.query_one(f"#r-{after}"))

    def _show_error(self, name: str, text: str) -> None:
        found = self.query(f"#e-{name}")
        if not text:
            found.remove()
        elif found:
            found.first(Static).update(text)
        else:
            slurm = "slurm" if name in {f[0] for f in SLURM} else ""
            box = Static(text, id=f"e-{name}", classes=f"field-error {slurm}".strip(), markup=False)
            self.query_one("#form").mount(box, after=self.query_one(f"#r-{name}"))

    # --- fleet selection -----------------------------------------------------------------------------------
    def use_selection(self) -> None:
        app = self.capp
        choice = job_choice(app.selection, app.nodes, app.ctx.fleet.local_names)
        if choice is None:
            return
        self.fill(self.form.set(launcher=choice.launcher, nodes=", ".join(choice.nodes), gpus=choice.gpus))
        self._note("\n".join(f"note: {n}" for n in choice.notes))

    def _note(self, text: str) -> None:
        notes = self.query_one("#compose-notes", Static)
        notes.update(text)
        notes.set_class(not text, "-none")

    @work(thread=True, exclusive=True, group="partitions", exit_on_error=False)
    def load_partitions(self) -> None:
        partitions = self.capp.ctx.partitions()
        if partitions:
            self.app.call_from_thread(self._show_partitions, partitions)

    def _show_partitions(self, partitions: list[str]) -> None:
        field = self.query_one("#f-partition", Input)
        field.suggester = SuggestFromList(partitions)
        field.placeholder = " | ".join(partitions)

    # --- launch ------------------------------------------------------------------------------------------------
    def action_launch(self) -> None:
        # Not an exclusive worker: cancelling one would not stop the launch thread it started, and a second
        # press would start a second run. One launch at a time instead.
        if self._launching:
            self.notify("a launch is already under way", title="launch", timeout=3)
            return
        self._launching = True
        self.launch()

    @work(group="launch", exit_on_error=False)
    async def launch(self) -> None:
        try:
            await self._launch()
        finally:
            self._launching = False

    async def _launch(self) -> None:
        from cockpit.fs.safeio import Untrusted
        from cockpit.launch import LaunchError
        from cockpit.tui.models.launching import launch_text

        checked = jobform.check(self.form, self._label())
        if checked.spec is None:
            self.notify(f"the job has {len(checked.problems)} problem(s); fix them before launching",
                        title="launch", severity="error")
            return
        ctx = self.capp.ctx
        self.notify(f"launching {checked.spec.name}…", title="launch", timeout=3)
        try:
            run_dir = await asyncio.to_thread(launch_text, checked.text, self.job_path, self._base_dir(),
                                              ctx.runs_dir, ctx.stop_grace)
        except (LaunchError, SpecError, OSError, Untrusted) as exc:  # Untrusted: a runs directory others can change
            self.notify(str(exc), title="launch failed", severity="error", timeout=15)
            return
        self.capp.open_run(run_dir)

