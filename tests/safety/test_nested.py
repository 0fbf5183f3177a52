"""Deeply nested JSON (issue 27, 6): in one run's status.json it raised RecursionError in every command that lists
runs and emptied the TUI's Runs list; in a metrics or beat file it crashed `plot`. Now it is a bad record: the run
is listed as unreadable with the reason, the other runs as before, the bad line skipped."""

from __future__ import annotations

import json
import time
from pathlib import Path

from safety.hostile import cockpit, make_run, rank_file, status

from cockpit.fs import safeio
from cockpit.run.store import UNREADABLE, list_runs

DEEP = "[" * 100_000 + "]" * 100_000  # past any recursion limit
SHALLOW_BUT_DEEP = {"pid": 1, "start": "1", "x": json.loads("[" * 60 + "]" * 60)}  # parses, nests past the limit


def runs_with_a_nested_status(tmp_path: Path) -> tuple[Path, Path, Path]:
    runs = tmp_path / "runs"
    good = make_run(runs, "good-20260101-000000-aaaa")
    rank_file(good, "log").write_text("[rank0] done\n")
    deep = make_run(runs, "deep-20260101-000000-bbbb")
    (deep / "status.json").write_text(DEEP)
    wide = make_run(runs, "wide-20260101-000000-cccc")
    (wide / "status.json").write_text(json.dumps(status(wide.name, "running", supervisor=SHALLOW_BUT_DEEP)))
    return runs, good, deep


def test_a_nested_status_is_an_unreadable_run_and_the_others_are_listed(tmp_path):
    runs, good, deep = runs_with_a_nested_status(tmp_path)
    rows = {d.name: s for d, s in list_runs(runs)}
    assert rows[good.name].state == "succeeded"
    assert rows[deep.name].state == UNREADABLE and "nested too deeply" in rows[deep.name].note
    assert "nested deeper than 32 levels" in rows["wide-20260101-000000-cccc"].note
    for args in (["ps"], ["ps", "--json"], ["logs", good.name], ["attach", good.name], ["diagnose", good.name]):
        r = cockpit(*args, runs=runs)
        assert r.returncode == 0 and "Traceback" not in r.stderr, (args, r.stderr)
    ps = cockpit("ps", runs=runs)
    assert ps.stdout.count(UNREADABLE) == 2 and good.name in ps.stdout


def test_nested_metrics_and_beat_lines_are_skipped_by_plot(tmp_path):
    runs = tmp_path / "runs"
    run = make_run(runs, "plot-20260101-000000-dddd", world_size=2)
    now = time.time()
    for rank in (0, 1):
        lines = [json.dumps({"step": s, "time": now - 50 + s, "loss": 1.0 / s}) for s in range(1, 25)]
        lines.insert(10, DEEP)
        (run / "metrics" / f"rank-{rank}.jsonl").write_text("\n".join(lines) + "\n")
        beats = [json.dumps({"n": 10 * s, "t": now - 50 + s, "sync": 0.1 * s}) for s in range(1, 25)]
        rank_file(run, "beat", rank).write_text("\n".join([DEEP, *beats]) + "\n")
    for metric, both in (("loss", "rank 1"), ("rate", "rank 1"), ("wait", "\n1 ")):  # wait: a row per rank
        r = cockpit("plot", run.name, "--metric", metric, "--width", "70", "--height", "14", runs=runs)
        assert r.returncode == 0 and "Traceback" not in r.stderr and both in r.stdout, (metric, r.stderr)


def test_the_tui_runs_list_shows_the_other_runs(tmp_path):
    """The Runs screen's worker lists through list_runs and reconcile_runs: a nested status empties nothing."""
    from cockpit.launch.control import reconcile_runs

    runs, good, deep = runs_with_a_nested_status(tmp_path)
    listed = {d.name: s.state for d, s in reconcile_runs(list_runs(runs))}
    assert listed[good.name] == "succeeded" and listed[deep.name] == UNREADABLE and len(listed) == 3


def test_loads_says_too_deep_as_bad_json():
    for text in (DEEP, '{"a":' * 50_000 + "1" + "}" * 50_000):
        try:
            safeio.loads(text)
        except ValueError as exc:
            assert "nested too deeply" in str(exc)
        else:
            raise AssertionError("parsed")
    assert not safeio.depth_at_most(SHALLOW_BUT_DEEP, 32) and safeio.depth_at_most({"a": [1, {"b": 2}]}, 3)
