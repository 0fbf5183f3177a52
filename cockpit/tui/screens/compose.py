"""Compose: the job form, validated live by cockpit.spec.model, with a preview of exactly what would run.

Every change re-checks the form in an exclusive worker (a newer check cancels an older one, whose result is
dropped); problems appear under the field they belong to and, positioned, next to the job's YAML. Save,
open and launch do their IO in workers too."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.suggester import SuggestFromList
from textual.widgets import Checkbox, Footer, Input, Label, Select, Static, TabbedContent, TabPane, TextArea
from textual.worker import get_current_worker

from cockpit.fleet.report import NodeReport
from cockpit.spec.model import BACKENDS, LAUNCHERS, PG_BACKENDS, PRECISIONS, JobSpec, SpecError
from cockpit.tui import form as jobform
from cockpit.tui.fleetview import job_choice
from cockpit.tui.messages import Validated
from cockpit.tui.screens.base import CockpitScreen
from cockpit.tui.screens.dialogs import ConfirmScreen, PathScreen
from cockpit.tui.widgets.navbar import NavBar

# (field, label, kind, choices or placeholder); slurm fields are shown only for launcher: slurm
FIELDS = [
    ("name", "name", "input", "my-job"),
    ("launcher", "launcher", "select", LAUNCHERS),
    ("nodes", "nodes", "input", "host1, host2"),
    ("gpus", "GPUs", "input", "none | all | 4 | [0,2]"),
    ("procs_per_node", "procs/node", "input", "auto"),
    ("backend", "backend", "select", BACKENDS),
    ("pg_backend", "pg backend", "select", PG_BACKENDS),
    ("precision", "precision", "select", PRECISIONS),
    ("script", "script", "input", "train.py"),
    ("args", "args", "input", "--epochs 3"),
    ("nccl_debug", "NCCL_DEBUG", "select", jobform.NCCL_DEBUG_LEVELS),
    ("nccl_socket_ifname", "NCCL ifname", "input", "eth0 or ^lo,docker0"),
    ("env", "env", "input", "NAME=value …"),
    ("sweep", "sweep grid", "input", "lr=0.1,0.01 batch-size=32,64"),
]
SLURM = [
    ("partition", "partition", "input", "gpu"),
    ("time", "time", "input", "02:00:00"),
    ("account", "account", "input", ""),
    ("qos", "qos", "input", ""),
    ("mem", "mem/node", "input", "64G"),
    ("cpus_per_task", "cpus/task", "input", "8"),
    ("gres_type", "gres type", "input", "a100"),
    ("requeue", "requeue", "checkbox", ""),
]
NODES_PLACEHOLDER = {"local": "this machine", "ssh": "host1, host2", "slurm": "2 or gpu[01-02]"}


class ComposeScreen(CockpitScreen):
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
            with Vertical(id="side"):
                yield Static("", id="problems", markup=False)
                with TabbedContent(id="preview-tabs"):
                    with TabPane("Preview", id="tab-preview"):
                        yield TextArea("", id="preview", read_only=True, soft_wrap=False, show_cursor=False)
                    with TabPane("YAML", id="tab-yaml"):
                        yield TextArea("", id="yaml", read_only=True, soft_wrap=False, show_line_numbers=True,
                                       show_cursor=False)
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
        self.app.selection_changed.subscribe(self, lambda _: self.use_selection())
        self.load_partitions()
        if self.app.ctx.job is not None:
            self.open_path(self.app.ctx.job)
        elif self.app.selection:
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
                    widget.set_options([(v or "unset", v) for v in choices])
                widget.value = value
        self.form_changed()

    def form_changed(self) -> None:
        launcher = self.form.launcher
        self.set_class(launcher == "slurm", "-slurm")
        nodes = self.query_one("#f-nodes", Input)
        nodes.disabled = launcher == "local"
        nodes.placeholder = NODES_PLACEHOLDER.get(launcher, "")
        self.query_one(NavBar).info = shown_path(self.job_path) if self.job_path else "new job (not saved)"
        self.validate(self.form)

    # --- validation and preview (worker) ---------------------------------------------------------------------
    def _label(self) -> str:
        return self.job_path.name if self.job_path else "job.yaml"

    def _base_dir(self) -> Path:
        return self.job_path.parent if self.job_path else self.app.ctx.base_dir

    @work(thread=True, exclusive=True, group="validate", exit_on_error=False)
    def validate(self, form: jobform.JobForm) -> None:
        from cockpit.launch.plan import dry_run_facts, with_shell_env

        worker = get_current_worker()
        checked = jobform.check(form, self._label())
        text = "(the preview appears when the job is valid)"
        if checked.spec is not None:
            job_path = str(self.job_path or self._base_dir() / "job.yaml")
            spec = with_shell_env(checked.spec)  # what an ssh launch from here would export
            facts = self.app.ctx.facts(dry_run_facts(spec, job_path, str(self.app.ctx.runs_dir)))
            text = preview_text(spec, facts)
        advice = interface_advice(checked.spec, form.nccl_socket_ifname.strip(), list(self.app.nodes))
        if not worker.is_cancelled:
            self.post_message(Validated(checked, text, advice))

    def on_validated(self, message: Validated) -> None:
        self.checked = checked = message.checked
        by_field = checked.by_field()
        for name in jobform.FIELD_NAMES:
            lines = [f"↳ {p.message}" + (f" (hint: {p.hint})" if p.hint else "") for p in by_field.get(name, [])]
            self._show_error(name, "\n".join(lines))
        self.query_one("#problems", Static).update(summary(checked, self._label()))
        self.query_one("#problems").set_class(checked.spec is None, "-invalid")
        self._show_note("advice", message.advice, after="nccl_socket_ifname")
        for area_id, text in (("#preview", message.preview), ("#yaml", checked.text)):
            area = self.query_one(area_id, TextArea)
            if area.text != text:
                area.load_text(text)
                area.refresh()  # load_text repaints only when the size changes; a same-sized job stayed old

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
        app = self.app
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
        partitions = self.app.ctx.partitions()
        if partitions:
            self.app.call_from_thread(self._show_partitions, partitions)

    def _show_partitions(self, partitions: list[str]) -> None:
        field = self.query_one("#f-partition", Input)
        field.suggester = SuggestFromList(partitions)
        field.placeholder = " | ".join(partitions)

    # --- actions ---------------------------------------------------------------------------------------------
    def action_open(self) -> None:
        self.ask_open()

    @work(exclusive=True, group="file", exit_on_error=False)
    async def ask_open(self) -> None:
        default = str(self.job_path or "jobs/demo.yaml")
        path = await self.app.push_screen_wait(PathScreen("Open a job file", default))
        if path:
            self.open_path(Path(path).expanduser())

    @work(exclusive=True, group="file", exit_on_error=False)
    async def open_path(self, path: Path) -> None:
        try:
            text = await asyncio.to_thread(path.read_text, encoding="utf-8")
            form = jobform.from_text(text)
        except (OSError, UnicodeDecodeError, jobform.FormError) as exc:
            self.notify(f"{path}: {exc}", title="open", severity="error")
            return
        self.job_path = path.resolve()
        self.clean = form
        self.fill(form)
        self._note("")

    def unsaved(self) -> bool:
        """Whether the form says another job than the file it was opened from or saved to (or the blank
        job): then quitting asks first."""
        return not jobform.same_job(self.form, self.clean)

    def action_save(self) -> None:
        self.ask_save()

    @work(exclusive=True, group="file", exit_on_error=False)
    async def ask_save(self) -> None:
        await self.save()

    async def save(self) -> bool:
        """Ask where, then write the job there; True once a file holds it. Waits on dialogs: call it from a
        worker (ctrl+s, or quitting with unsaved edits). Saved in another directory, the job keeps running
        where it ran (jobform.pinned)."""
        checked = jobform.check(self.form, self._label())
        if checked.spec is None:
            self.notify(f"the job has {len(checked.problems)} problem(s); fix them before saving",
                        title="save", severity="error")
            return False
        default = str(self.job_path or self.app.ctx.base_dir / f"{self.form.name.strip() or 'job'}.yaml")
        answer = await self.app.push_screen_wait(PathScreen("Save the job as", default))
        if not answer:
            return False
        path = Path(answer).expanduser().resolve()
        form = jobform.pinned(self.form, str(self._base_dir().absolute()), str(path.parent))
        pin = form.rest.get("workdir") if form is not self.form else None
        text = jobform.check(form, path.name).text
        if await asyncio.to_thread(path.exists):
            if await asyncio.to_thread(_holds, path, text):
                self.notify(f"{path} already holds this job", title="save")
                self._saved(path, form)
                return True
            if not await self.app.push_screen_wait(ConfirmScreen(f"{path} exists. Replace it?", "Replace")):
                return False
        from cockpit.tui.launching import save_text

        try:
            await asyncio.to_thread(save_text, path, text)
        except OSError as exc:
            self.notify(f"{path}: {exc.strerror or exc}", title="save", severity="error")
            return False
        self._saved(path, form)
        self.notify(f"saved {path}" + (f" (workdir: {pin}, where the job ran from before)" if pin else ""),
                    title="save")
        return True

    def _saved(self, path: Path, form: jobform.JobForm) -> None:
        self.job_path = path
        self.clean = form
        self.form = self.form.set(rest=form.rest)  # a pinned workdir has no field: no widget to fill
        self.form_changed()

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
        from cockpit.launch import LaunchError
        from cockpit.tui.launching import launch_text

        checked = jobform.check(self.form, self._label())
        if checked.spec is None:
            self.notify(f"the job has {len(checked.problems)} problem(s); fix them before launching",
                        title="launch", severity="error")
            return
        ctx = self.app.ctx
        self.notify(f"launching {checked.spec.name}…", title="launch", timeout=3)
        try:
            run_dir = await asyncio.to_thread(launch_text, checked.text, self.job_path, self._base_dir(),
                                              ctx.runs_dir, ctx.stop_grace)
        except (LaunchError, SpecError, OSError) as exc:
            self.notify(str(exc), title="launch failed", severity="error", timeout=15)
            return
        self.app.open_run(run_dir)


def interface_advice(spec: JobSpec | None, nccl_value: str, nodes: list[NodeReport]) -> str:
    """What to put in NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) for an ssh job over several nodes, from the
    interfaces the fleet's probes reported (cockpit.preflight.ifadvice); and whether the value typed selects anything on
    each node. Empty where there is nothing to say."""
    if spec is None or spec.launcher != "ssh" or len(spec.hosts) < 2:
        return ""
    from cockpit.preflight import ifadvice

    seen = {n.host: n.interfaces for n in nodes}
    unknown = [h for h in spec.hosts if not seen.get(h)]
    if unknown:
        return (f"interface advice: no interfaces known for {', '.join(unknown)} (hint: show these nodes in "
                "Fleet: cockpit --nodes …)")
    ifaces = {h: seen[h] for h in spec.hosts}
    advice = ifadvice.advise(ifaces)
    lines = [f"advice: {advice.env_text()} ({advice.reason})" if advice.subnet else f"advice: {advice.reason}"]
    if nccl_value:
        empty = [h for h in spec.hosts if not ifadvice.selected(ifadvice.NCCL, nccl_value, ifaces[h])]
        if empty:
            lines.append(f"NCCL_SOCKET_IFNAME={nccl_value} selects no interface on {', '.join(empty)}")
    return "\n".join(lines)


def shown_path(path: Path) -> str:
    """A path as a user reads it best: relative to the working directory when under it, else with ~."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        home = Path.home()
        return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


def _holds(path: Path, text: str) -> bool:
    try:
        return path.read_text(encoding="utf-8") == text
    except (OSError, UnicodeDecodeError):
        return False


def preview_text(spec: JobSpec, facts) -> str:
    """What the launcher would run: the sbatch script, or each node's torchrun / DataParallel script."""
    from cockpit.render import RenderError, default_kind, render

    try:
        return render(spec, facts, default_kind(spec), for_display=True)
    except RenderError as exc:
        return f"cannot render: {exc}"


def summary(checked: jobform.Checked, label: str) -> str:
    spec = checked.spec
    if spec is None:
        n = len(checked.problems)
        return f"✗ {n} problem{'s' if n != 1 else ''}\n" + "\n".join(p.format(label) for p in checked.problems)
    procs = "one per GPU" if spec.nprocs is None else str(spec.nprocs)
    world = f" = world {spec.world_size}" if spec.world_size else ""
    trials = f" · sweep of {len(spec.sweep.trials())}" if spec.sweep else ""
    gpus = {0: "CPU", None: "all GPUs"}.get(spec.gpus_per_node, f"{spec.gpus_per_node} GPU/node")
    return (f"✓ valid · {spec.launcher} · {spec.num_nodes} node{'s' if spec.num_nodes != 1 else ''} × {procs}"
            f"{world} · {gpus} · {spec.dist_backend} · {spec.precision}{trials}")
