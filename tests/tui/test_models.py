"""The TUI's pure models, without a screen: form <-> YAML <-> spec, fleet rows and selection, bounded log
storage, filters, metrics reading, theme files, user config, staging a composed job."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import JOBS, REPO, cockpit_env
from tui.tuidata import fleet_snapshot

from cockpit.plot.source import RunSeries
from cockpit.spec.model import load_spec, parse_spec
from cockpit.tui.models import fleet as fleetview
from cockpit.tui.models import form
from cockpit.tui.models.config import load_config, save_config
from cockpit.tui.models.gpu_history import History
from cockpit.tui.models.launching import STAGE_DIR, job_file_for
from cockpit.tui.models.log_filter import LineFilter, level_of
from cockpit.tui.models.log_store import LineRing, LogStore
from cockpit.tui.themes import load_themes, parse_theme
from cockpit.tui.widgets.metrics_plot import SIDE_POINTS


@pytest.mark.parametrize("job", JOBS, ids=[j.name for j in JOBS])
def test_every_example_job_survives_the_form(job):
    f = form.from_text(job.read_text())
    checked = form.check(f, job.name)
    assert checked.problems == ()
    want = dataclasses.replace(load_spec(job), source="")
    assert dataclasses.replace(checked.spec, source="") == want


def test_problems_map_to_the_fields_that_caused_them():
    f = form.JobForm(name="x", script="t.py", launcher="ssh", nodes="a, b", backend="dp", gpus="0,x",
                     env="FOO", args="'open", time="1:30")
    fields = {form.field_of(p.path): p.message for p in form.check(f).problems}
    assert "dp (DataParallel) runs in one process on one node" in fields["backend"]
    assert fields["gpus"] == "'x' is not a GPU id"
    assert "NAME=value" in fields["env"] and "quote" in fields["args"].lower() or "quotation" in fields["args"]


def test_slurm_fields_only_for_slurm_and_single_gpu_ids_stay_ids():
    f = form.JobForm(name="x", script="t.py", partition="gpu", gpus="[0]")
    data, _ = form.to_data(f)
    assert "slurm" not in data and data["gpus"] == [0]
    assert form.check(f).spec.gpu_ids == (0,)
    data, _ = form.to_data(f.set(launcher="slurm", nodes="2", gpus="4", time="02:00:00", requeue=True))
    assert data["slurm"] == {"partition": "gpu", "time": "02:00:00", "requeue": True} and data["nodes"] == 2


def test_unshown_keys_ride_along_and_a_broken_file_still_opens():
    f = form.from_text("name: a\nscript: t.py\nseed: 7\nworkdir: sub\nslurm: {modules: [cuda]}\n")
    data, _ = form.to_data(f.set(launcher="slurm"))
    assert data["seed"] == 7 and data["workdir"] == "sub" and data["slurm"]["modules"] == ["cuda"]
    broken = form.from_text("name: a\nscript: t.py\nbackend: dpp\n")
    assert [p.message for p in form.check(broken).problems] == ["'dpp' is not one of ddp | dp | fsdp"]
    with pytest.raises(form.FormError):
        form.from_text("- just\n- a list\n")


def test_rows_are_in_nvidia_smi_order_with_cpu_and_error_nodes():
    rows = fleetview.rows(fleet_snapshot(), History(), fleetview.Selection())
    kinds = [(r.host, r.gpu, r.kind) for r in rows]
    assert kinds[0] == ("localhost", None, "node-cpu") and rows[0].cells[2] == "CPU · 2 cores"
    assert ("gpu-a5000", 1, "gpu") in kinds and kinds[-1] == ("gpu-down", None, "node-error")
    a5000 = [r.gpu for r in rows if r.host == "gpu-a5000" and r.gpu is not None]
    assert a5000 == [0, 1]


def test_selection_to_job_choice():
    nodes = fleet_snapshot()
    sel = fleetview.Selection().toggle_gpu("gpu-a5000", 1)
    choice = fleetview.job_choice(sel, nodes, ("localhost",))
    assert (choice.launcher, choice.nodes, choice.gpus) == ("ssh", ["gpu-a5000"], "[1]")
    sel = sel.toggle_node(nodes[2])  # a5000 partly selected -> all of it
    assert sel.mark(nodes[2]) == "●" and fleetview.job_choice(sel, nodes, ()).gpus == "[0,1]"
    sel = sel.toggle_node(nodes[1])  # + h100 (one GPU): ids differ between nodes
    choice = fleetview.job_choice(sel, nodes, ())
    assert choice.nodes == ["gpu-h100", "gpu-a5000"] and choice.gpus == "[0]" and choice.notes
    local = fleetview.job_choice(fleetview.Selection().toggle_node(nodes[0]), nodes, ("localhost",))
    assert (local.launcher, local.gpus) == ("local", "none")
    assert fleetview.job_choice(fleetview.Selection(), nodes, ()) is None


def test_line_ring_is_bounded_and_keeps_the_newest():
    ring = LineRing(5)
    for i in range(0, 12, 3):
        ring.extend([f"l{j}" for j in range(i, i + 3)])
    assert ring.lines() == ["l7", "l8", "l9", "l10", "l11"] and len(ring) == 5
    ring.extend([f"x{j}" for j in range(9)])
    assert ring.lines() == ["x4", "x5", "x6", "x7", "x8"]
    big = LineRing(100)  # chunks of 1 KB and more are kept compressed
    lines = [f"line {i} " + "x" * 60 + " é" for i in range(250)]
    for i in range(0, 250, 50):
        big.extend(lines[i:i + 50])
    assert big.lines() == lines[-100:]
    store = LogStore(max_lines=3)
    assert store.add(("h", 0), ["a", "b"], 1.0) == ["[h:0] a", "[h:0] b"]
    store.add(("h", 1), ["c", "d"], 2.0)
    assert store.view(None) == ["[h:0] b", "[h:1] c", "[h:1] d"] and store.view(("h", 0)) == ["a", "b"]


def test_level_filter_and_search():
    assert level_of("NCCL WARN NET/Socket : peer closed") == "warn"
    assert level_of("RuntimeError: boom") == "error" and level_of("[cockpit] step=10") == "info"
    f = LineFilter("nccl")
    assert f.accepts("host:1:2 [0] NCCL WARN bootstrap") and not f.accepts("UserWarning: x")
    assert LineFilter("all", "STEP").accepts("[cockpit] step=3") and not LineFilter("error").accepts("ok")
    assert LineFilter().next_level().level == "warn"


def test_the_run_views_metrics_reader_is_incremental_and_last_record_wins(tmp_path):
    """The side panel reads through cockpit.plot.source.RunSeries (one reader for the panel and the charts)."""
    path = tmp_path / "metrics" / "rank-0.jsonl"
    path.parent.mkdir()
    rec = lambda step, loss: json.dumps({"step": step, "loss": loss, "time": 100.0 + step}) + "\n"  # noqa: E731
    path.write_text(rec(1, 1.0) + rec(2, 0.5) + '{"step": 3, "lo')
    reader = RunSeries(tmp_path, keep=SIDE_POINTS)
    assert reader.poll() and reader.series()[0].counts == (1, 2)
    with open(path, "a") as f:
        f.write('ss": 0.25, "time": 103}\n' + rec(2, 0.4))  # a resumed run repeats step 2
    assert reader.poll() and not reader.poll()
    s = reader.series()[0]
    assert s.counts == (1, 2, 3) and s.loss == (1.0, 0.4, 0.25)


def test_theme_files_load_and_bad_ones_are_reported_not_fatal(tmp_path):
    themes, errors = load_themes([REPO / "themes"])
    names = {t.name for t in themes}
    assert {"cockpit-dark", "cockpit-light"} <= names and errors == []
    assert not next(t for t in themes if t.name == "cockpit-light").dark
    (tmp_path / "good.yaml").write_text("name: mine\ncolors: {primary: '#112233'}\n")
    (tmp_path / "bad.yaml").write_text("name: Bad Name\ndark: maybe\ncolors: {primary: nope, pink: '#fff'}\nx: 1\n")
    (tmp_path / "broken.yaml").write_text("name: [\n")
    themes, errors = load_themes([tmp_path])
    assert [t.name for t in themes] == ["mine"]
    bad = next(e for e in errors if "bad.yaml" in e)
    for part in ("unknown key 'x'", "name: 'Bad Name'", "dark: expected true or false",
                 "colors.primary: 'nope' is not a colour", "colors.pink: unknown colour"):
        assert part in bad
    assert any("broken.yaml: not YAML" in e for e in errors)
    with pytest.raises(ValueError, match="primary"):
        parse_theme("name: x\ncolors: {}\n", "x.yaml")
    with pytest.raises(ValueError) as exc:  # variables reach textual's stylesheet parser: checked first
        parse_theme("name: x\ncolors: {primary: red}\nvariables: {footer-key-foreground: 'zzz no', Bad_Key: red, "
                    "block-cursor-text-style: bold shiny}\n", "x.yaml")
    for part in ("variables.footer-key-foreground: 'zzz no' is not a colour", "variables.Bad_Key: not a variable",
                 "variables.block-cursor-text-style: 'shiny' is not a text style"):
        assert part in str(exc.value)


def test_config_round_trip_is_atomic_and_keeps_other_keys(tmp_path):
    path = tmp_path / "cockpit" / "tui.yaml"
    assert load_config(path) == ({}, None)
    save_config({"theme": "cockpit-light"}, path)
    path.write_text(path.read_text() + "other: kept\n")
    save_config({"theme": "cockpit-dark"}, path)
    assert load_config(path) == ({"theme": "cockpit-dark"}, None)
    assert "other: kept" in path.read_text() and list(path.parent.iterdir()) == [path]
    path.write_text("theme: [\n")
    settings, problem = load_config(path)
    assert settings == {} and "cannot read" in problem


def test_a_changed_form_is_staged_with_an_absolute_workdir(tmp_path):
    demo = REPO / "jobs" / "demo.yaml"
    same = form.check(form.from_text(demo.read_text()))
    assert job_file_for(same.text, same.spec, demo, demo.parent, tmp_path) == demo
    changed = form.check(form.from_text(demo.read_text()).set(args="--epochs 1"))
    staged = job_file_for(changed.text, changed.spec, demo, demo.parent, tmp_path)
    assert staged.parent == tmp_path / STAGE_DIR and oct(staged.stat().st_mode & 0o777) == "0o600"
    spec = load_spec(staged)
    assert spec.args == ("--epochs", "1") and spec.workdir == str(demo.parent)
    assert parse_spec(staged.read_text()).script == "demo.py"


def test_the_tui_package_never_imports_torch():
    code = "import sys, cockpit.tui.app, cockpit.tui.screens.run_view; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                         env=cockpit_env())
    assert out.stdout.strip() == "False", out.stderr
    offenders = [str(p.relative_to(REPO)) for p in (REPO / "cockpit" / "tui").rglob("*.py")
                 if any(w in p.read_text() for w in ("import torch", "from torch"))]
    assert offenders == []


def test_pure_models_do_not_import_textual():
    """The rule of cockpit/tui/models/, checked by folder: importing every module there loads no textual (a new
    model is checked without being listed here)."""
    pure = sorted(p.stem for p in (REPO / "cockpit" / "tui" / "models").glob("*.py") if p.stem != "__init__")
    assert len(pure) >= 16
    code = ("import sys\n" + "".join(f"import cockpit.tui.models.{m}\n" for m in pure)
            + "print('textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


TEXTUAL = ("textual", "textual_plotext")


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports anywhere in its body, deferred and TYPE_CHECKING ones too; ``from P import
    x`` counts as P and P.x (x may be a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def textual_path(module: str) -> list[str] | None:
    """A chain of imports from the cockpit module ``module`` to textual, deferred imports followed; None: none."""
    files = {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p
             for p in (REPO / "cockpit").rglob("*.py")}
    todo, seen = [[module]], {module}
    while todo:
        chain = todo.pop()
        for name in sorted(imported(files[chain[-1]])):
            if name.split(".")[0] in TEXTUAL:
                return [*chain, name]
            parts = name.split(".")  # importing a.b.c runs a/__init__ and a/b/__init__ too
            for step in (".".join(parts[:i]) for i in range(2, len(parts) + 1)):
                if step in files and step not in seen:
                    seen.add(step)
                    todo.append([*chain, step])
    return None


def tui_modules() -> dict[str, Path]:
    return {".".join(p.relative_to(REPO).with_suffix("").parts): p for p in (REPO / "cockpit" / "tui").rglob("*.py")
            if p.name != "__init__.py"}


def test_no_model_reaches_textual_even_through_a_deferred_import():
    """The folder's rule, statically: no import in cockpit/tui/models/, at import time or inside a function,
    leads to textual through any chain of cockpit modules."""
    models = [m for m in tui_modules() if m.startswith("cockpit.tui.models.")]
    assert len(models) >= 16
    assert {m: chain for m in models if (chain := textual_path(m))} == {}


def test_every_tui_module_without_textual_is_in_models():
    """The converse: a TUI module outside models/ that never reaches textual belongs in models/, where the
    rule above keeps it so."""
    outside = [m for m in tui_modules() if not m.startswith("cockpit.tui.models.")]
    assert len(outside) >= 20
    assert [m for m in outside if textual_path(m) is None] == []


def test_staged_dir_is_not_a_run(tmp_path):
    from cockpit.run.store import list_runs

    (tmp_path / STAGE_DIR).mkdir()
    assert list_runs(Path(tmp_path)) == []


def test_the_stores_lines_in_all_are_bounded_each_source_keeping_an_equal_share():
    """4,096 ranks x max_lines each let the feed process grow past 400 MB: past ``total_lines`` in all, each
    source keeps its share (its newest lines); below it, max_lines each as before."""
    store = LogStore(max_lines=100, total_lines=300)
    store.add(("n", 0), [f"a{i}" for i in range(150)], None)
    store.add(("n", 1), [f"b{i}" for i in range(150)], None)
    assert store.keep == 100 and store.view(("n", 0)) == [f"a{i}" for i in range(50, 150)]
    store.expect([("n", r) for r in range(6)])  # a batch of six sources: 50 lines each
    for r in range(6):
        store.add(("n", r), [f"{r}-{i}" for i in range(80)], None)
    assert store.keep == 50 and sum(len(log.ring) for log in store.sources.values()) == 300
    assert store.view(("n", 1)) == [f"1-{i}" for i in range(30, 80)]
    assert store.sources[("n", 1)].lines == 230  # every line counted, kept or not
