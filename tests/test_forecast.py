"""cockpit.insight.forecast: the pure forecast (rate, fits, requeues, GPU-hours) with plain numbers, and
sweep.samples' random search (deterministic for a seed, validated with positions)."""

from __future__ import annotations

import pytest

from cockpit.insight.forecast import forecast, hms, seconds_per_step, slurm_seconds
from cockpit.launch.rerun import renamed
from cockpit.launch.slurm.rerun import with_array
from cockpit.spec.model import SpecError, parse_spec


def steady(n: int, every: float, start: float = 1000.0, warmup: float = 0.0) -> list[tuple[float, int]]:
    """Steps 1..n, each ``every`` seconds, the first one ``warmup`` seconds late."""
    return [(start + warmup + every * (s - 1), s) for s in range(1, n + 1)]


def test_the_rate_is_the_median_of_recent_intervals_not_the_warmup_or_one_slow_step():
    points = [(0.0, 1), (30.0, 2)] + [(30.0 + 0.5 * k, 2 + k) for k in range(1, 40)]
    points[20] = (points[20][0] + 20, points[20][1])  # one checkpoint pause
    assert seconds_per_step(points) == pytest.approx(0.5)
    assert seconds_per_step([(5.0, 3)]) is None and seconds_per_step([]) is None


def test_a_resumed_run_counts_each_step_by_its_last_record():
    first = steady(10, 1.0)
    again = [(2000.0 + 2.0 * k, 5 + k) for k in range(0, 11)]  # resumed at 5, 2 s/step now
    assert seconds_per_step(first + again) == pytest.approx(2.0)


def test_fits_within_the_limit_and_says_how_much_spare():
    f = forecast(points=steady(100, 1.0), total_steps=200, now=1100.0, elapsed=110.0, gpus=8,
                 time_limit=600.0, limited=True)
    assert f.fits == "yes" and f.requeues == 0 and f.remaining_s == pytest.approx(100.0)
    assert f.eta == pytest.approx(1200.0) and f.gpu_hours == pytest.approx(8 * 110 / 3600)
    assert "to spare" in f.why and f.short() == "eta 1m40s fits"


def test_too_long_counts_the_requeues_with_the_usr1_margin():
    # 1000 steps left at 1 s = 1000 s; an attempt trains 300 - 60 = 240 s; 140 s left in this one.
    f = forecast(points=steady(100, 1.0), total_steps=1100, now=1100.0, elapsed=100.0, gpus=4,
                 time_limit=300.0, limited=True, requeue=True, signal_seconds=60, attempt_elapsed=100.0)
    assert f.fits == "no" and f.requeues == 4  # ceil((1000 - 140) / 240)
    assert f.short() == "eta 16m 4 requeues"
    off = forecast(points=steady(100, 1.0), total_steps=1100, now=1100.0, elapsed=100.0, gpus=4,
                   time_limit=300.0, limited=True)
    assert off.fits == "no" and "near step 300" in off.why and off.requeues == 3  # ceil(800 / 300)


@pytest.mark.parametrize(("kwargs", "why"), [
    ({"points": []}, "no step metrics"),
    ({"total_steps": None}, "total steps unknown"),
    ({"points": steady(1, 1.0)}, "one step measured"),
    ({"time_limit": None}, "time limit unknown"),
])
def test_unknown_is_a_value_and_says_what_is_missing(kwargs, why):
    base = {"points": steady(10, 1.0), "total_steps": 20, "now": 1010.0, "elapsed": 10.0, "gpus": 0,
            "time_limit": 60.0, "limited": True}
    f = forecast(**{**base, **kwargs})
    assert f.fits == "unknown" and why in f.why and f.requeues is None
    assert f.gpu_text() == "CPU-only" and f.gpu_hours == 0.0


def test_a_run_without_total_steps_says_how_to_get_an_eta_within_80_columns():
    line = forecast(points=steady(10, 1.0), total_steps=None, now=1010.0, elapsed=10.0, gpus=0).line()
    assert line.index("set total_steps:") < 60 and line.startswith("forecast: step 10/? (no eta"), line


def test_a_limited_run_without_a_start_time_is_unknown_not_a_traceback():
    f = forecast(points=steady(10, 1.0), total_steps=20, now=1010.0, elapsed=None, gpus=0, time_limit=60.0,
                 limited=True)
    assert f.fits == "unknown" and "time used unknown" in f.why and f.requeues is None
    assert f.remaining_s == pytest.approx(10.0) and f.gpu_hours is None


def test_no_limit_fits_and_an_ended_run_reports_progress():
    f = forecast(points=steady(10, 1.0), total_steps=20, now=1010.0, elapsed=10.0, gpus=2)
    assert f.fits == "yes" and f.why == "no time limit"
    # `ps` says the eta alone: "fits" means within a time limit, and there is none (the new-user pass)
    assert f.remaining_s == pytest.approx(10.0) and f.short() == f"eta {hms(10.0)}" and "fits" not in f.short()
    done = forecast(points=steady(20, 1.0), total_steps=20, now=1030.0, elapsed=3600.0, gpus=2, ended=True)
    assert done.ended and done.line() == "progress: ended at step 20/20, 1 s/step; 2.00 GPU-h"


def test_slurm_time_syntax_and_durations():
    assert [slurm_seconds(t) for t in ("30", "5:30", "01:02:03", "1-2", "1-02:03", "1-02:03:04")] == [
        1800, 330, 3723, 93600, 93780, 93784]
    assert slurm_seconds(None) is None and slurm_seconds("soon") is None
    assert [hms(s) for s in (None, 42, 125, 1800, 3700, 200000)] == ["?", "42s", "2m05s", "30m", "1h01m", "2d07h"]


SEARCH = """\
name: rs
script: train.py
sweep:
  samples: 5
  seed: {seed}
  params:
    lr: {{log_range: [1.0e-4, 1.0e-1]}}
    dropout: {{range: [0.0, 0.5]}}
    opt: [adam, sgd]
"""


def test_random_search_is_deterministic_for_a_seed_and_inside_its_ranges():
    a, b = (parse_spec(SEARCH.format(seed=3)).sweep.trials() for _ in range(2))
    assert a == b and len(a) == 5
    assert parse_spec(SEARCH.format(seed=4)).sweep.trials() != a
    for t in a:
        args = dict(zip(t[::2], t[1::2], strict=True))
        assert 1e-4 <= float(args["--lr"]) <= 1e-1 and 0 <= float(args["--dropout"]) <= 0.5
        assert args["--opt"] in ("adam", "sgd")


def test_random_search_with_a_grid_runs_every_sample_at_every_point():
    spec = parse_spec(SEARCH.format(seed=0) + "  grid: {layers: [2, 4]}\n")
    trials = spec.sweep.trials()
    assert spec.sweep.count() == len(trials) == 10
    assert [t[:2] for t in trials] == [("--layers", "2")] * 5 + [("--layers", "4")] * 5
    assert [t[2:] for t in trials[:5]] == [t[2:] for t in trials[5:]]


@pytest.mark.parametrize(("params", "where", "hint"), [
    ("lr: {log_range: [0, 1]}", "8:10: sweep.params.lr.log_range: a log range starts above 0", "range:"),
    ("lr: {range: [1, 0.5]}", "8:10: sweep.params.lr.range: lo must be below hi", "[0.5, 1]"),
    ("lr: {range: [a, 1]}", "8:10: sweep.params.lr.range: expected two numbers", "range: [1e-4"),
    ("lr: {uniform: [0, 1]}", "8:5: sweep.params.lr: expected one of choice", "range: [0.0, 0.5]"),
])
def test_bad_params_are_reported_where_they_are_written(params, where, hint):
    text = "name: rs\nscript: train.py\nsweep:\n  samples: 2\n  params:\n    ok: [1]\n    x: [2]\n    " + params + "\n"
    with pytest.raises(SpecError) as err:
        parse_spec(text, "job.yaml")
    [line] = err.value.lines()
    assert line.startswith(f"job.yaml:{where}") and hint in line, line


def test_params_need_samples_and_samples_are_bounded():
    with pytest.raises(SpecError, match=r"sweep.params: params are drawn at random.*samples: 8"):
        parse_spec("name: rs\nscript: t.py\nsweep:\n  params: {lr: [1, 2]}\n")
    with pytest.raises(SpecError, match=r"2 x 6000 samples = 12000 trials, more than 10000"):
        parse_spec("name: rs\nscript: t.py\nsweep:\n  samples: 6000\n  params: {lr: [1]}\n  grid: {a: [1, 2]}\n")
    with pytest.raises(SpecError, match=r"sweep.samples: expected a whole number, got 'auto'"):
        parse_spec("name: rs\nscript: t.py\nsweep:\n  samples: auto\n  params: {lr: [1, 2]}\n")
    with pytest.raises(SpecError, match=r"total_steps: 0 is out of range"):
        parse_spec("name: t\nscript: t.py\ntotal_steps: 0\n")
    assert parse_spec("name: t\nscript: t.py\ntotal_steps: 5000\n").total_steps == 5000


def test_a_rerun_script_is_the_old_one_with_a_new_run_id_and_the_failed_indices():
    old = "#SBATCH --job-name=s\n#SBATCH --array=0-5%3\nexport COCKPIT_RUN_DIR=/r/s-1-ab\n# run s-1-ab\n"
    new = with_array(renamed(old, "s-1-ab", "s-2-cd"), [1, 4])
    assert new == "#SBATCH --job-name=s\n#SBATCH --array=1,4%3\nexport COCKPIT_RUN_DIR=/r/s-2-cd\n# run s-2-cd\n"
    assert with_array("#SBATCH --array=0-2\n", [2]) == "#SBATCH --array=2\n"


def test_ps_says_no_progress_not_an_eta_while_the_run_is_stalled(tmp_path):
    """Issue 33, item 8: `ps` said `eta 17s fits` beside `stalled 32 s`, an eta from the rate before the stall."""
    from cockpit.cli.console import _forecast_cells
    from cockpit.run.findings import LiveFinding
    from cockpit.run.store import RunStatus

    f = forecast(points=steady(100, 1.0), total_steps=200, now=1100.0, elapsed=110.0, gpus=8,
                 time_limit=600.0, limited=True)
    status = RunStatus(run_id="r", name="r", launcher="local", job_file="j.yaml", hosts=["h"], world_size=2,
                       state="running", created=990.0, started=990.0)
    assert _forecast_cells(tmp_path, status, 1100.0, stored=f).split() == ["eta", "1m40s", "fits", "0.24"]
    for kind in ("stall", "stopped"):
        status.findings = [LiveFinding(kind=kind, text="rank 1 made no progress", quiet_s=32.0)]
        assert _forecast_cells(tmp_path, status, 1100.0, stored=f).split() == ["?", "no", "progress", "0.24"]
    status.findings = [LiveFinding(kind="straggler", rank=1, text="rank 1 is slow")]  # slow, not stopped: eta
    assert _forecast_cells(tmp_path, status, 1100.0, stored=f).split()[:3] == ["eta", "1m40s", "fits"]
