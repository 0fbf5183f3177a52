"""A hang on the rate and heat charts (issue 33 item 7a): every rank stops stepping while its process lives on
until a stop kills it. The time axis runs to the ranks' exits (a final run) or to now (a live one), the heat map
shows the stalled time as no progress and the rate drops to 0; a run that ended at its last step shows no stall.
Pure chart values, and one `cockpit plot` of a run directory written the way a run writes it (no real run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import REPO, cockpit_env

from cockpit.plot import chart as charts
from cockpit.plot.series import Track
from cockpit.plot.source import RunSeries, run_clock
from cockpit.plot.text import draw, heat_rows
from cockpit.run.store import RunStatus, create_run_dir, write_status

T0, RATE, STEPS = 1000.0, 10.0, 60  # two ranks at 10 steps/s for 6 s, then nothing


def stepping(rank: int):
    track = Track(rank)
    for s in range(STEPS):
        track.add(s, T0 + s / RATE, 1.0 / (s + 1))
    return track.series()


def tail(chart, label: str, cells: int) -> str:
    return "".join(ch for ch, _ in dict(heat_rows(chart))[label][-cells:])


def test_a_hang_until_the_stop_shows_as_no_progress_to_the_ranks_exits():
    series = [stepping(0), stepping(1)]
    killed = {0: T0 + 60.0, 1: T0 + 60.0}  # stopped 54 s after the last step; the stall threshold was 6 s
    heat = charts.build("heat", series, "hung", 60, 10, ended=killed, span=(T0, T0 + 6.0), quiet=6.0)
    assert tail(heat, "0", 40) == "·" * 40 and tail(heat, "1", 40) == "·" * 40
    assert heat.heat.t1 == T0 + 60.0 and "60 s" in draw(heat, 60, 10)
    rate = charts.build("rate", series, "hung", 80, 20, ended=killed, span=(T0, T0 + 6.0), quiet=6.0)
    assert rate.x_end == 60.0 and all(line.ys[-2:] == (0.0, 0.0) and line.xs[-1] == 60.0 for line in rate.lines)
    assert rate.note == "no progress at the end: ranks 0, 1"
    text = draw(rate, 80, 20)
    assert "60.0" in text.splitlines()[-2], text  # the x axis's last tick: the stop, not the last step


def test_a_run_that_ended_at_its_last_step_shows_no_stall_and_a_live_one_shows_it_once_past_the_threshold():
    series = [stepping(0), stepping(1)]
    done = {0: T0 + 6.1, 1: T0 + 6.1}
    heat = charts.build("heat", series, "ok", 60, 10, ended=done, quiet=6.0)
    assert "·" not in tail(heat, "0", 51)
    rate = charts.build("rate", series, "ok", 80, 20, ended=done, quiet=6.0)
    assert rate.note == "" and all(min(line.ys) > 0 for line in rate.lines)
    # live (no exit), the threshold unknown: the watchdog's adaptive one (at least 60 s) decides
    quiet_20s = charts.build("heat", series, "live", 60, 10, until=T0 + 26.0)
    assert "·" not in tail(quiet_20s, "0", 30)
    hung_90s = charts.build("heat", series, "live", 60, 10, until=T0 + 96.0)
    assert tail(hung_90s, "0", 40) == "·" * 40


def test_the_clock_of_a_run_comes_from_its_status_and_exit_records(tmp_path):
    status = RunStatus(run_id="r", name="r", launcher="local", job_file="/j.yaml", hosts=["n"], world_size=2,
                       state="running", created=T0, watch={"threshold_s": 6.0})
    assert run_clock(status, now=T0 + 50) == (T0 + 50, 6.0)
    status.state, status.ended, status.watch, status.stall_after = "stopped", T0 + 70, None, 30.0
    assert run_clock(status, T0 + 99, {0: T0 + 60.0, 1: None}) == (T0 + 60.0, 30.0)  # the ranks' end
    assert run_clock(status, T0 + 99, {}) == (T0 + 70, 30.0)  # no exit record: the run's end
    assert run_clock(None, T0) == (None, None)


def hung_run(runs: Path) -> Path:
    """A stopped run whose two ranks stepped for 6 s and hung 54 s more until the stop: the files a run leaves
    (metrics records, exit records with their times, status.json with the watchdog's threshold)."""
    run_dir = create_run_dir(runs, "hung-20261128-000000-abcd")
    (run_dir / "metrics").mkdir()
    for rank in (0, 1):
        with open(run_dir / "metrics" / f"rank-{rank}.jsonl", "w") as f:
            f.writelines(json.dumps({"step": s, "time": T0 + s / RATE, "loss": 1.0, "rank": rank}) + "\n"
                         for s in range(STEPS))
        (run_dir / "logs" / f"rank-{rank}.n.exit").write_text(f"137 {T0 + 60.0:.6f}\n")
        (run_dir / "logs" / f"rank-{rank}.n.log").write_text("[cockpit] start\n")
    write_status(run_dir, RunStatus(run_id=run_dir.name, name="hung", launcher="local", job_file="/j.yaml",
                                    hosts=["n"], world_size=2, state="stopped", created=T0 - 1, started=T0 - 1,
                                    ended=T0 + 62.0, exit_code=130, watch={"threshold_s": 6.0}))
    return run_dir


def test_cockpit_plot_heat_and_rate_of_a_hung_run_show_the_hang(tmp_path):  # ~2 s: two `cockpit plot`s
    run_dir = hung_run(tmp_path / "runs")
    assert RunSeries(run_dir).ended() == {0: T0 + 60.0, 1: T0 + 60.0}
    env = cockpit_env(COCKPIT_RUNS_DIR=str(tmp_path / "runs"))

    def plot(metric: str) -> str:
        r = subprocess.run([sys.executable, "-m", "cockpit", "plot", str(run_dir), "--metric", metric, "--width",
                            "70", "--height", "14"], capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout

    rows = [line for line in plot("heat").splitlines() if line[:2] in ("0 ", "1 ")]
    assert len(rows) == 2 and all(row.rstrip().endswith("·" * 40) for row in rows), rows
    rate = plot("rate")
    assert "no progress at the end: ranks 0, 1" in rate and "60.0" in rate, rate
