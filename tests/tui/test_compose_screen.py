"""Compose: live validation with the spec's messages under the field that caused them, the preview following
the form (and an opened file, on screen), open / save (never overwriting silently, and runnable from where
it is saved) through the dialogs; quitting asks before dropping edits; help lists the keys that work."""

from __future__ import annotations

import dataclasses
import html
import subprocess
import sys
from pathlib import Path

from helpers import REPO, cockpit_env
from tui.tuidata import until

from cockpit.fleet.records import Interface, NodeReport
from cockpit.spec.model import load_spec
from cockpit.tui.app import CockpitApp
from cockpit.tui.models import form as jobform
from cockpit.tui.models.compose import interface_advice
from cockpit.tui.screens.compose import ComposeScreen
from cockpit.tui.screens.dialogs import ConfirmScreen, PathScreen, UnsavedScreen
from cockpit.tui.screens.fleet import FleetScreen
from cockpit.tui.screens.help import HelpScreen
from cockpit.tui.screens.run_view import RunViewScreen
from cockpit.tui.screens.runs import RunsScreen
from cockpit.tui.screens.stacks import StacksScreen

DEMO = REPO / "jobs" / "demo.yaml"


def text(screen, selector: str) -> str:
    return str(screen.query_one(selector).content)


def error(screen, field: str) -> str:
    """The error line under a field ('' when it has none)."""
    found = screen.query(f"#e-{field}")
    return str(found.first().content) if found else ""


def note(screen, name: str) -> str:
    found = screen.query(f"#n-{name}")
    return str(found.first().content) if found else ""


def test_interface_advice_from_the_probed_interfaces():
    spec = dataclasses.replace(load_spec(DEMO), launcher="ssh", hosts=("a", "b"))

    def node(host, *ifaces):
        return NodeReport(host, "ok", interfaces=tuple(Interface(n, True, n == "lo", ipv4=(ip,)) for n, ip in ifaces))

    nodes = [node("a", ("lo", "127.0.0.1/8"), ("eth0", "10.1.0.1/24")),
             node("b", ("lo", "127.0.0.1/8"), ("eth0", "10.1.0.2/24"))]
    advice = interface_advice(spec, "", nodes)
    assert advice.startswith("advice: NCCL_SOCKET_IFNAME=eth0") and "GLOO_SOCKET_IFNAME=eth0" in advice
    assert "10.1.0.0/24" in advice
    assert "NCCL_SOCKET_IFNAME=ib selects no interface on a, b" in interface_advice(spec, "ib", nodes)
    assert "selects no interface" not in interface_advice(spec, "^lo", nodes)
    assert "no interfaces known for b" in interface_advice(spec, "", nodes[:1])
    assert interface_advice(dataclasses.replace(spec, hosts=("a",)), "", nodes) == ""  # one node: nothing to say
    assert interface_advice(None, "", nodes) == ""


async def open_compose(app, pilot) -> ComposeScreen:
    await pilot.press("f3")
    await until(pilot, lambda: isinstance(app.screen, ComposeScreen) and app.screen.checked is not None,
                what="compose")
    return app.screen


async def set_field(pilot, screen: ComposeScreen, name: str, value) -> None:
    screen.query_one(f"#f-{name}").value = value
    await until(pilot, lambda: getattr(screen.form, name) == value and screen.checked is not None
                and not screen.workers, what=f"{name} = {value!r} checked")


async def answer_path(pilot, path: Path, what: str) -> None:
    await until(pilot, lambda: isinstance(pilot.app.screen, PathScreen), what=what)
    pilot.app.screen.query_one("#path").value = str(path)
    await pilot.press("enter")


def on_screen(app) -> str:
    """The text the terminal shows now (what was painted, not what a widget holds)."""
    return html.unescape(app.export_screenshot()).replace("\xa0", " ")


async def test_live_validation_and_preview(ctx):
    ctx.job = DEMO
    app = CockpitApp(ctx)
    async with app.run_test(size=(80, 24)) as pilot:
        compose = await open_compose(app, pilot)
        await until(pilot, lambda: compose.form.script == "demo.py" and compose.checked.spec is not None)
        assert text(compose, "#problems").startswith("✓ valid · local · 1 node × 2 = world 2 · CPU · gloo")
        await set_field(pilot, compose, "launcher", "ssh")
        await set_field(pilot, compose, "nodes", "gpu-a, gpu-b")
        await until(pilot, lambda: "no interfaces known for gpu-a, gpu-b" in note(compose, "advice"),
                    what="the interface advice note")
        await set_field(pilot, compose, "backend", "dp")
        assert error(compose, "backend") == ("↳ dp (DataParallel) runs in one process on one node "
                                             "(hint: use backend: ddp for several nodes)")
        assert error(compose, "gpus") == ""
        assert text(compose, "#problems").startswith("✗ 1 problem\nbackend: dp (DataParallel)")  # by field
        assert compose.query_one("#preview").text.startswith("(the preview appears")
        await set_field(pilot, compose, "pg_backend", "nccl")
        assert "nccl needs GPUs and this job uses none" in error(compose, "pg_backend")
        await set_field(pilot, compose, "gpus", "[0,x]")
        assert "'x' is not a GPU id" in error(compose, "gpus")
        assert error(compose, "pg_backend") == ""  # with GPUs asked for, nccl is fine

        # the preview follows the form
        await set_field(pilot, compose, "launcher", "local")
        await set_field(pilot, compose, "nodes", "")
        await set_field(pilot, compose, "gpus", "none")
        await set_field(pilot, compose, "pg_backend", "auto")
        await set_field(pilot, compose, "backend", "ddp")
        await until(pilot, lambda: "torchrun" in compose.query_one("#preview").text, what="the torchrun preview")
        preview = compose.query_one("#preview").text
        assert "--nproc-per-node=2" in preview and "cd /work/jobs" in preview
        assert not compose.query_one("#r-partition").display  # Slurm fields only for Slurm jobs
        await set_field(pilot, compose, "procs_per_node", "3")
        assert "--nproc-per-node=3" in compose.query_one("#preview").text
        await set_field(pilot, compose, "launcher", "slurm")
        await set_field(pilot, compose, "time", "01:00:00")
        assert compose.has_class("-slurm") and compose.query_one("#r-time").display
        preview = compose.query_one("#preview").text
        assert preview.startswith("#!/bin/bash\n#SBATCH") and "#SBATCH --time=01:00:00" in preview
        await set_field(pilot, compose, "nccl_debug", "INFO")
        assert "NCCL_DEBUG=INFO" in compose.query_one("#preview").text
        assert "NCCL_DEBUG: INFO" in compose.query_one("#yaml").text


async def test_save_never_overwrites_silently_and_open(ctx, tmp_path):
    ctx.job = DEMO
    app = CockpitApp(ctx)
    target = tmp_path / "mine" / "job.yaml"
    async with app.run_test(size=(80, 24)) as pilot:
        compose = await open_compose(app, pilot)
        await until(pilot, lambda: compose.form.script == "demo.py")
        await set_field(pilot, compose, "args", "--epochs 1 --steps-per-epoch 20")

        async def save_as(path: Path) -> None:
            await pilot.press("ctrl+s")
            await answer_path(pilot, path, "the save dialog")

        await save_as(target)
        await until(pilot, lambda: target.exists(), what="the saved file")
        spec = load_spec(target)
        assert spec.args == ("--epochs", "1", "--steps-per-epoch", "20") and spec.pg_backend == "auto"
        assert spec.workdir == str(REPO / "jobs")  # saved elsewhere, it still runs demo.py where it is
        assert dataclasses.replace(spec, source="", args=(), workdir=None) == dataclasses.replace(
            load_spec(DEMO), source="", args=())
        saved = target.read_text()
        await set_field(pilot, compose, "precision", "bf16")
        await save_as(target)
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the overwrite question")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, ComposeScreen))
        assert target.read_text() == saved
        await save_as(target)
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the overwrite question")
        await pilot.press("y")
        await until(pilot, lambda: load_spec(target).precision == "bf16", what="the replaced file")
        assert [p.name for p in target.parent.iterdir()] == ["job.yaml"]  # no temporary left behind

        # open another job file; an invalid form is not saved
        await pilot.press("ctrl+o")
        await until(pilot, lambda: isinstance(app.screen, PathScreen), what="the open dialog")
        app.screen.query_one("#path").value = str(REPO / "jobs" / "slurm.yaml")
        await pilot.press("enter")
        await until(pilot, lambda: compose.form.launcher == "slurm" and compose.checked.spec is not None
                    and compose.checked.spec.name == "slurm-demo", what="slurm.yaml in the form")
        assert compose.query_one("#f-partition").value == "gpu" and compose.query_one("#f-requeue").value
        assert "#SBATCH --partition=gpu" in compose.query_one("#preview").text
        await set_field(pilot, compose, "time", "1:30:99:1")
        assert "is not a Slurm time limit" in error(compose, "time")
        await pilot.press("ctrl+s")
        await pilot.pause(0.2)
        assert isinstance(app.screen, ComposeScreen)  # refused before asking for a path
        assert load_spec(target).precision == "bf16"


async def test_an_opened_job_is_previewed_on_screen(ctx):
    app = CockpitApp(ctx)
    async with app.run_test(size=(120, 36)) as pilot:
        compose = await open_compose(app, pilot)
        await until(pilot, lambda: 'job "job"' in on_screen(app), what="the blank job's preview")
        await pilot.press("ctrl+o")
        await answer_path(pilot, DEMO, "the open dialog")
        await until(pilot, lambda: compose.form.script == "demo.py" and 'job "demo"' in compose.query_one(
            "#preview").text, what="the demo in the form")
        await pilot.pause()
        # same size as the blank job's preview: painted anyway, not only once a field changes
        shown = on_screen(app)
        assert ('job "demo"' in shown, 'job "job"' in shown) == (True, False)
        assert not compose.unsaved()


def cockpit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = cockpit_env()
    return subprocess.run([sys.executable, "-m", "cockpit", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


async def test_a_job_saved_in_another_directory_still_runs(ctx, tmp_path):
    ctx.job = DEMO
    app = CockpitApp(ctx)
    target = tmp_path / "elsewhere" / "mine.yaml"
    async with app.run_test(size=(80, 24)) as pilot:
        compose = await open_compose(app, pilot)
        await until(pilot, lambda: compose.form.script == "demo.py")
        await pilot.press("ctrl+s")
        await answer_path(pilot, target, "the save dialog")
        await until(pilot, lambda: target.exists() and compose.job_path == target, what="the saved file")
        assert f"workdir: {REPO / 'jobs'}" in compose.query_one("#yaml").text and not compose.unsaved()
    other = tmp_path / "cwd"
    other.mkdir()
    checked = cockpit("validate", str(target), cwd=other)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    rendered = cockpit("render", str(target), cwd=other)
    assert rendered.returncode == 0, rendered.stderr
    assert f"cd {REPO / 'jobs'}" in rendered.stdout.replace("'", "") and " demo.py" in rendered.stdout
    spec = load_spec(target)
    assert (Path(spec.workdir) / spec.script).is_file()


def test_pinned_keeps_what_a_job_file_s_directory_meant():
    form = jobform.JobForm(script="train.py")
    assert jobform.pinned(form, "/a/jobs", "/b").rest == {"workdir": "/a/jobs"}
    assert jobform.pinned(form, "/a/jobs", "/a/jobs/") is form  # the same directory: nothing moves
    up = form.set(rest={"workdir": "../data", "seed": 3})
    assert jobform.pinned(up, "/a/jobs", "/b").rest == {"workdir": "/a/data", "seed": 3}
    for kept in ({"workdir": "/srv/x"}, {"workdir": "~/x"}, {"workdir": 7}):  # 7: the spec says what is wrong
        kept_form = form.set(rest=kept)
        assert jobform.pinned(kept_form, "/a", "/b") is kept_form
    assert jobform.pinned(form.set(script="/opt/train.py"), "/a", "/b").rest == {}
    module = jobform.JobForm(script="", rest={"module": "pkg.train"})
    assert jobform.pinned(module, "/a", "/b").rest == {"module": "pkg.train", "workdir": "/a"}
    assert jobform.same_job(form, form.set(args="  ")) and not jobform.same_job(form, form.set(args="-x"))


async def test_quitting_asks_before_dropping_edits(ctx, tmp_path):
    ctx.job = DEMO
    app = CockpitApp(ctx)
    async with app.run_test(size=(80, 24)) as pilot:
        compose = await open_compose(app, pilot)
        await until(pilot, lambda: compose.form.script == "demo.py")
        compose.query_one("#f-name").focus()
        await pilot.press("end", "q")  # typed into the field: help lists ^q alone there
        await until(pilot, lambda: compose.form.name == "demoq" and compose.unsaved(), what="the typed q")
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert (["ctrl+q"], "Quit") in app.screen.keys
        assert (["f3"], "Compose: the job form") in app.screen.keys  # 2 is typed into the field too
        await pilot.press("escape", "ctrl+q")
        await until(pilot, lambda: isinstance(app.screen, UnsavedScreen), what="the unsaved question")
        await pilot.press("ctrl+q")  # asked already: one question
        await pilot.press("c")
        await until(pilot, lambda: app.screen is compose)
        assert app.return_code is None and compose.form.name == "demoq"

        # from another screen, q asks too; save: the save dialog over Compose, then quit
        await pilot.press("f4")
        await until(pilot, lambda: isinstance(app.screen, RunsScreen))
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert (["ctrl+q", "q"], "Quit") in app.screen.keys and (["f2", "1"], "Fleet: nodes and GPUs") in \
            app.screen.keys
        await pilot.press("escape", "q")
        await until(pilot, lambda: isinstance(app.screen, UnsavedScreen), what="the unsaved question")
        await pilot.press("s")
        target = tmp_path / "saved.yaml"
        await answer_path(pilot, target, "the save dialog")
        await until(pilot, lambda: app.return_code is not None, what="quit after saving")
        assert app.current_mode == "compose" and load_spec(target).name == "demoq"


async def test_discard_quits_and_no_edits_quit_at_once(ctx, tmp_path):
    app = CockpitApp(ctx)
    async with app.run_test(size=(80, 24)) as pilot:
        compose = await open_compose(app, pilot)
        await set_field(pilot, compose, "script", "other.py")
        await pilot.press("ctrl+q")
        await until(pilot, lambda: isinstance(app.screen, UnsavedScreen), what="the unsaved question")
        await pilot.press("d")
        await until(pilot, lambda: app.return_code == 0, what="quit")
    assert list(tmp_path.glob("*.yaml")) == []
    again = CockpitApp(ctx)
    async with again.run_test(size=(80, 24)) as pilot:
        await open_compose(again, pilot)
        await pilot.press("ctrl+q")
        await until(pilot, lambda: again.return_code == 0, what="quit without a question")


async def test_mode_keys_work_from_every_screen(ctx, runs):
    app = CockpitApp(ctx)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f4")
        await until(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.runs, what="the runs")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunViewScreen), what="the run view")
        view = app.screen
        await pilot.press("k")
        await until(pilot, lambda: isinstance(app.screen, StacksScreen), what="the stacks")
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen), what="fleet from the stacks")
        await pilot.press("f4", "escape")  # back where it was left: the stacks over the run view
        await until(pilot, lambda: app.screen is view)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("f3")  # help closes: it described the run view
        compose = await open_compose(app, pilot)
        await pilot.press("f4")
        await until(pilot, lambda: app.screen is view, what="the run view again, without its help")
        await pilot.press("f3")
        await until(pilot, lambda: app.screen is compose)
        await pilot.press("ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, PathScreen), what="the save dialog")
        await pilot.press("f2")  # a question waits for its answer
        await pilot.pause(0.1)
        assert isinstance(app.screen, PathScreen) and app.current_mode == "compose"
        await pilot.press("escape", "f2")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen))
