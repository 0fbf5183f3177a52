"""Compose's words without a screen (cockpit.tui.models.compose): the summary over the preview, the lines under
a field, a path as a user reads it. The interface advice is tested beside the screen (test_compose_screen)."""

from __future__ import annotations

from pathlib import Path

from cockpit.tui.models import compose as composeview
from cockpit.tui.models import form


def test_the_summary_of_a_valid_job_and_of_a_broken_one():
    ok = form.check(form.JobForm(name="x", script="t.py", launcher="ssh", nodes="a, b", gpus="none",
                                 procs_per_node="2"), "x.yaml")
    assert composeview.summary(ok).startswith("✓ valid · ssh · 2 nodes × 2 = world 4 · CPU · ")
    bad = form.check(form.JobForm(name="x", script="t.py", launcher="ssh", nodes="a, b", backend="dp", env="FOO",
                                  time="1:30"), "x.yaml")
    text = composeview.summary(bad)
    n = len(bad.problems)
    assert n > 1 and text.splitlines()[0] == f"✗ {n} problems" and len(text.splitlines()) == n + 1
    # each by its field, as validate names it, never at a position in the form's YAML (no file holds it)
    assert [line.removeprefix("warning: ").split(":")[0] for line in text.splitlines()[1:]] == [
        p.path or "job" for p in bad.problems]
    assert "x.yaml" not in text
    one = form.check(form.JobForm(name="x", script="t.py", gpus="0,x"), "x.yaml")
    assert composeview.summary(one).startswith("✗ 1 problem\ngpus")


def test_a_fields_problems_each_on_a_line_with_their_hints():
    bad = form.check(form.JobForm(name="x", script="t.py", gpus="0,x"), "x.yaml").by_field()["gpus"]
    lines = composeview.field_error(bad).splitlines()
    assert len(lines) == len(bad) and lines[0].startswith("↳ ") and "'x' is not a GPU id" in lines[0]
    assert all(("(hint: " in line) == bool(p.hint) for line, p in zip(lines, bad, strict=True))
    assert composeview.field_error([]) == ""


def test_a_path_is_shown_relative_to_here_else_from_home():
    assert composeview.shown_path(Path.cwd() / "jobs" / "demo.yaml") == "jobs/demo.yaml"
    assert composeview.shown_path(Path("/nonexistent-root/job.yaml")) == "/nonexistent-root/job.yaml"


def test_a_job_whose_script_is_not_there_is_no_longer_called_valid(tmp_path):
    """Issue 33, item 8: Compose said `✓ valid` for a new job whose script does not exist. The local launcher's
    own here checks (what `cockpit validate` and the run's preflight refuse) now reach the summary and the field."""
    from cockpit.launch import registry
    from cockpit.preflight.checks import FAIL

    job_path = str(tmp_path / "job.yaml")
    checked = form.check(form.JobForm(name="x", script="train.py", gpus="none"), "job.yaml")
    assert checked.spec is not None

    def here(c):
        refusals = [r for r in registry.for_spec(c.spec).here_checks(c.spec, job_path) if r.level == FAIL]
        return form.with_here(c, refusals)

    missing = here(checked)
    summary = composeview.summary(missing)
    assert missing.spec is not None and summary.startswith("⚠ valid file, would not run here: 1 problem\n"), summary
    # issue 33's new-user pass: the new, unsaved job's warning was at "job.yaml:1:13"; it names the field
    assert summary.splitlines()[1].startswith(f"warning: script: train.py is missing in {tmp_path}"), summary
    [problem] = missing.by_field()["script"]
    assert problem.warning and f"train.py is missing in {tmp_path}" in problem.message
    assert "create the script" in (problem.hint or "")
    (tmp_path / "train.py").write_text("print('hi')\n")
    assert composeview.summary(here(checked)).startswith("✓ valid · local · 1 node")
