"""Compose's job file: open one into the form, save the form to one (asking where, and before replacing
another job), and whether the form holds edits no file has (the app asks before quitting then: save, discard
or stay). The IO runs in workers; save() waits on dialogs, so it is called from one."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from textual import work

from cockpit.tui.models import form as jobform
from cockpit.tui.screens.base import CockpitScreen
from cockpit.tui.screens.dialogs import ConfirmScreen, PathScreen


class JobFile(CockpitScreen):
    """Mixed into the compose screen, which holds the form and shows it (fill, form_changed, _note)."""

    form: jobform.JobForm
    clean: jobform.JobForm  # the job as last opened or saved: quitting asks when the form says another
    job_path: Path | None
    fill: Callable[[jobform.JobForm], None]
    form_changed: Callable[[], None]
    _note: Callable[[str], None]

    def _label(self) -> str:
        """The name the form's problems are positioned in."""
        return self.job_path.name if self.job_path else "job.yaml"

    def _base_dir(self) -> Path:
        """Where the job's relative paths (script, workdir) start."""
        return self.job_path.parent if self.job_path else self.capp.ctx.base_dir

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
        default = str(self.job_path or self.capp.ctx.base_dir / f"{self.form.name.strip() or 'job'}.yaml")
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
        from cockpit.tui.models.launching import save_text

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


def _holds(path: Path, text: str) -> bool:
    try:
        return path.read_text(encoding="utf-8") == text
    except (OSError, UnicodeDecodeError):
        return False
