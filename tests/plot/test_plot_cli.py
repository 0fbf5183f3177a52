"""`cockpit plot` on real runs: the demo (cockpit.train's metrics: loss and steps/s per rank) and a plain
torch.distributed script with a slow rank (no metrics: the rank hook's beats give collectives/s, and the
wait share names the rank the others wait for). The PNG is written and opened; bad input gets one clear line
and exit 2, and a file that is not a PNG is never overwritten."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env, wait_for
from test_runs_e2e import cockpit, only_run

from cockpit.run.store import list_runs, read_status

pytestmark = pytest.mark.slow
PLAIN = REPO / "tests" / "hang" / "scripts" / "plain_hang.py"
DEMO_ARGS = ["--epochs", "1", "--steps-per-epoch", "80", "--hidden", "64", "--layers", "1", "--slow-rank", "1",
             "--slow-ms", "60"]  # the README's straggler example: rank 1 works 60 ms more a step


def run_job(runs: Path, name: str, script: Path, args: list[str]) -> Path:
    job = runs.parent / f"{name}.yaml"
    job.write_text(f"name: {name}\nscript: {script}\nargs: {json.dumps(args)}\nlauncher: local\ngpus: none\n")
    r = cockpit(runs, "run", str(job), "-q", timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    return only_run(runs)[0]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, Path]:
    runs = tmp_path_factory.mktemp("demo") / "runs"
    return runs, run_job(runs, "demo", REPO / "jobs" / "demo.py", DEMO_ARGS)


def open_png(path: Path):
    from matplotlib.image import imread

    pixels = imread(path)
    return pixels


def test_the_demos_loss_per_rank_in_the_terminal_and_as_a_png(demo, tmp_path):
    runs, run_dir = demo
    r = cockpit(runs, "plot", str(run_dir), "--width", "80", "--height", "24", "--png", str(tmp_path / "loss.png"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) <= 24 and max(len(line) for line in lines) <= 80
    assert f"{run_dir.name}: loss per rank" in lines[0]
    assert "rank 0" in r.stdout and "rank 1" in r.stdout and "step" in lines[-1]
    assert "\x1b[" not in r.stdout  # not a terminal: no colour codes
    assert "┤" in r.stdout and "┬" in r.stdout  # a y axis with ticks, an x axis with ticks
    assert r.stderr.strip() == f"wrote {tmp_path / 'loss.png'}"
    pixels = open_png(tmp_path / "loss.png")
    assert pixels.shape == (500, 1000, 4)
    rgb = pixels[:, :, :3]
    coloured = ((rgb.max(axis=2) - rgb.min(axis=2)) > 0.3).sum()  # the lines: not white, not grey
    assert coloured > 500, coloured


def test_the_demos_rate_and_heat_map(demo):
    runs, run_dir = demo
    rate = cockpit(runs, "plot", str(run_dir), "--metric", "rate", "--width", "100", "--height", "20")
    assert rate.returncode == 0 and "steps/s per rank" in rate.stdout and "seconds" in rate.stdout
    heat = cockpit(runs, "plot", str(run_dir), "--metric", "heat", "--width", "60", "--height", "12")
    rows = [line for line in heat.stdout.splitlines() if line[:2] in ("0 ", "1 ")]
    assert heat.returncode == 0 and len(rows) == 2
    # A healthy run: from its first step (the time axis starts at the launch: a start slowed by load is blank) to
    # its end, no gap, mostly at full rate.
    stepping = rows[0][2:].strip()
    assert set(stepping) <= set("█▓▒░") and len(stepping) >= 10 and stepping.count("█") > len(stepping) / 2, rows[0]
    # to the end: the axis runs to the ranks' exits, so only the teardown after the last step may be blank (a
    # column or two; more on a loaded machine, where destroy_process_group and the exit take longer)
    blank_tail = len(rows[0].rstrip("\n")) - len(rows[0].rstrip())
    assert len(rows[0].rstrip()) >= 48 and blank_tail <= max(3, len(stepping) // 4), rows[0]
    wait = cockpit(runs, "plot", str(run_dir), "--metric", "wait", "--width", "80", "--height", "12")
    assert wait.returncode == 0 and "they wait for rank 1" in wait.stdout and "\n1▶" in wait.stdout, wait.stdout
    heat12 = cockpit(runs, "plot", str(run_dir), "--metric", "heat", "--width", "80", "--height", "12")

    def axis(out: str) -> list[str]:
        return [line for line in out.splitlines() if line.strip().startswith("0 s")]
    assert axis(wait.stdout) == axis(heat12.stdout) and len(axis(wait.stdout)) == 1  # one time axis for both
    only = cockpit(runs, "plot", str(run_dir), "--rank", "1", "--width", "80", "--height", "20")
    assert only.returncode == 0 and "rank 1" in only.stdout and "rank 0" not in only.stdout


def test_a_slow_rank_in_a_plain_script_is_the_one_the_others_wait_for(tmp_path):
    runs = tmp_path / "runs"
    run_dir = run_job(runs, "slow", PLAIN, ["--steps", "150", "--step-ms", "5", "--slow-rank", "1",
                                            "--slow-ms", "40"])
    assert not (run_dir / "metrics").exists()  # the script writes none: the beats are the data
    wait = cockpit(runs, "plot", str(run_dir), "--metric", "wait", "--width", "80", "--height", "12")
    assert wait.returncode == 0, wait.stderr
    assert "they wait for rank 1" in wait.stdout, wait.stdout
    rate = cockpit(runs, "plot", str(run_dir), "--metric", "rate", "--width", "80", "--height", "16",
                   "--png", str(tmp_path / "rate.png"))
    assert rate.returncode == 0 and "collectives/s" in rate.stdout
    assert open_png(tmp_path / "rate.png").shape == (500, 1000, 4)


def test_bad_input_is_one_line_and_exit_2_and_nothing_on_disk_is_lost(demo, tmp_path):
    runs, run_dir = demo
    job = tmp_path / "job.yaml"
    job.write_text("name: keep me\n")
    r = cockpit(runs, "plot", str(run_dir), "--png", str(job), "--width", "80", "--height", "20")
    assert r.returncode == 2 and "is there and is not a PNG; not replacing it" in r.stderr
    assert job.read_text() == "name: keep me\n"
    assert "Traceback" not in r.stderr
    r = cockpit(runs, "plot", "nosuchrun")
    assert r.returncode == 2 and r.stderr.startswith("cockpit: no run 'nosuchrun'")
    r = cockpit(runs, "plot", str(run_dir), "--rank", "7")
    assert r.returncode == 2 and "no points for rank 7 (it has ranks 0, 1)" in r.stderr
    r = cockpit(runs, "plot", str(run_dir), "--png", str(tmp_path))
    assert r.returncode == 2 and "is a directory" in r.stderr
    r = cockpit(runs, "plot", str(run_dir), "--width", "5")
    assert r.returncode == 2 and "out of range 10..1000" in r.stderr
    empty = tmp_path / "runs" / "empty-run"  # not beside the demo: the module's other tests plot the demo run
    empty.mkdir(parents=True)
    (empty / "status.json").write_text((run_dir / "status.json").read_text())
    r = cockpit(runs, "plot", str(empty), "--width", "80", "--height", "20", "--png", str(tmp_path / "e.png"))
    assert r.returncode == 2 and "no metrics: cockpit.train writes metrics/rank-R.jsonl" in r.stdout
    assert r.stderr.startswith("cockpit: nothing to draw: no metrics") and "(no PNG written)" in r.stderr
    r = cockpit(runs, "plot", str(tmp_path))
    assert r.returncode == 2 and "is not a run directory" in r.stderr
    r = cockpit(runs, "plot", str(run_dir), "--every", "1")
    assert r.returncode == 2 and "--every sets how often -f redraws" in r.stderr
    r = cockpit(runs, "plot", str(run_dir), "--png", "-")
    assert r.returncode == 2 and "a PNG goes to a file" in r.stderr and not (REPO / "-").exists()


def test_the_size_asked_for_is_the_size_drawn_whatever_the_terminal(demo):
    runs, run_dir = demo
    for metric in ("loss", "rate", "heat", "wait"):
        r = cockpit(runs, "plot", str(run_dir), "--metric", metric, "--width", "150", "--height", "40")
        lines = r.stdout.splitlines()
        assert r.returncode == 0 and max(len(line) for line in lines) <= 150, metric
        if metric in ("loss", "rate"):  # not capped at the (absent) terminal's 80 x 24
            assert max(len(line) for line in lines) == 150 and len(lines) == 40, metric
    log = cockpit(runs, "plot", str(run_dir), "--log", "--width", "80", "--height", "20")
    assert log.returncode == 0 and "loss (log)" in log.stdout


def test_without_matplotlib_the_png_option_says_how_to_get_it(demo, tmp_path):
    runs, run_dir = demo
    # matplotlib made unimportable in this one process (sys.modules[name] = None makes `import` raise)
    argv = ["plot", str(run_dir), "--width", "80", "--height", "20", "--png", str(tmp_path / "x.png")]
    code = ("import sys; sys.modules['matplotlib'] = None; from cockpit.cli.main import main; "
            f"sys.exit(main({argv!r}))")
    env = cockpit_env(COCKPIT_RUNS_DIR=str(runs))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "a PNG needs matplotlib, which is not installed (hint: pip install 'cockpit[plot]'" in r.stderr
    assert not (tmp_path / "x.png").exists()


UNTIL_TOLD = """\
import json, os, pathlib, time
run = pathlib.Path(os.environ["COCKPIT_RUN_DIR"])
rank = int(os.environ["RANK"])
out = run / "metrics" / f"rank-{rank}.jsonl"
out.parent.mkdir(exist_ok=True)
step = 0
with open(out, "a") as f:  # cockpit.train's metrics records, written by hand: no torch to import
    while step < 5 or not (run / "finish").exists():  # the test says when
        step += 1
        f.write(json.dumps({"step": step, "epoch": 0, "loss": 1.0 / step, "samples_per_s": 100.0,
                            "time": time.time(), "rank": rank}) + "\\n")
        f.flush()
        time.sleep(0.1)
"""


def test_follow_redraws_until_the_run_ends_and_ctrl_c_leaves_the_run_alone(tmp_path):
    """The run goes on until the test says (its ranks wait for a file): Ctrl-C on plot -f meets a live run
    however slow the machine. (A demo run of a fixed length ended before the Ctrl-C in two full runs of the
    suite, plot -f then drew its end and exited 0.)"""
    runs = tmp_path / "runs"
    script = tmp_path / "until_told.py"
    script.write_text(UNTIL_TOLD)
    job = tmp_path / "long.yaml"
    job.write_text(f"name: long\nscript: {script}\nlauncher: local\ngpus: none\n")
    env = cockpit_env(COCKPIT_RUNS_DIR=str(runs), NO_COLOR="1")
    run = subprocess.Popen([sys.executable, "-m", "cockpit", "run", str(job), "-q"], cwd=REPO, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    run_dir = None
    try:
        run_dir = wait_for(lambda: (list_runs(runs) or [(None,)])[0][0], 60, "the run directory")
        wait_for(lambda: (run_dir / "metrics" / "rank-1.jsonl").exists(), 60, "the first metrics")
        plot = [sys.executable, "-m", "cockpit", "plot", str(run_dir), "-f", "--every", "0.3", "--width", "80",
                "--height", "16"]
        # SIGINT as a terminal leaves it: pytest-xdist's workers ignore SIGINT, a child inherits that, and Python
        # then installs no KeyboardInterrupt (plot -f went on after the Ctrl-C in the full suite, never alone)
        left = subprocess.Popen(plot, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        assert left.stdout.readline()  # the first chart is on its way
        left.send_signal(signal.SIGINT)
        out, err = left.communicate(timeout=60)
        assert left.returncode == 130 and "Traceback" not in err, err
        assert not read_status(run_dir).final  # leaving the chart left the run alone
        followed = subprocess.Popen(plot, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
        title = f"{run_dir.name}: loss per rank"
        seen = ""
        while title not in seen:  # the first chart drawn while the run goes on
            line = followed.stdout.readline()
            assert line, followed.stderr.read()
            seen += line
        (run_dir / "finish").touch()  # the ranks end; plot -f draws the end and exits 0
        rest, err = followed.communicate(timeout=120)
        assert followed.returncode == 0, err
        assert read_status(run_dir).state == "succeeded"
        assert (seen + rest).count(title) >= 2, seen + rest
    finally:
        if run_dir is not None:
            (run_dir / "finish").touch()
        run.communicate(timeout=180)
