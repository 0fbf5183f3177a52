"""A script's own metrics reach `cockpit plot` and the run's progress line without changing the script: real
scripts (tests/plot/scripts/) run through `cockpit run` under the local launcher: a plain gloo DDP script that
prints ``step N loss=X`` (2 ranks), a Hugging Face style script that writes ``trainer_state.json`` (and prints
the Trainer's log dicts, which must lose to the file), and a Lightning script on CPU with 2 processes whose
CSVLogger writes ``lightning_logs/version_0/metrics.csv``, and a gloo DDP script (2 ranks) that logs with
torch.utils.tensorboard.SummaryWriter. Each: the loss chart draws, and the summary's progress line has the
steps the script logged."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, cockpit_env
from test_runs_e2e import cockpit, only_run

from cockpit.insight.forecast_inputs import read_metrics
from cockpit.plot.source import RunSeries

pytestmark = pytest.mark.slow
SCRIPTS = REPO / "tests" / "plot" / "scripts"


def run_job(tmp: Path, name: str, script: str, args: list[str], procs: int) -> tuple[Path, Path, str]:
    runs, work = tmp / "runs", tmp / "work"
    work.mkdir()
    job = tmp / f"{name}.yaml"
    job.write_text(f"name: {name}\nscript: {SCRIPTS / script}\nargs: {json.dumps(args)}\nlauncher: local\n"
                   f"gpus: none\nprocs_per_node: {procs}\nworkdir: {work}\n")
    r = cockpit(runs, "run", str(job), timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return runs, only_run(runs)[0], r.stdout


def plotted(runs: Path, run_dir: Path) -> str:
    r = cockpit(runs, "plot", str(run_dir), "--metric", "loss", "--width", "80", "--height", "20")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{run_dir.name}: loss per rank" in r.stdout and "┤" in r.stdout, r.stdout
    return r.stdout


def test_printed_loss_lines_of_a_plain_ddp_script(tmp_path):
    runs, run_dir, out = run_job(tmp_path, "printed", "printed_ddp.py", ["--steps", "12"], 2)
    assert not (run_dir / "metrics").exists()  # no metrics file of cockpit's: the prints are all there is
    chart = plotted(runs, run_dir)
    assert "rank 0" in chart and "rank 1" in chart
    assert re.search(r"progress: ended at step 12/\?", out), out[-2000:]
    reader = RunSeries(run_dir)
    reader.poll_all()
    assert reader.origins() == {0: "printed", 1: "printed"}
    [zero] = reader.series([0])
    assert zero.counts == tuple(range(1, 13))  # the steps the lines name; the config dict and greeting: nothing
    text = next((run_dir / "logs").glob("rank-0.*.log")).read_text()
    loss = [float(m) for m in re.findall(r"^step \d+ loss=([\d.]+)", text, re.MULTILINE)]
    assert zero.loss == tuple(loss)


def test_trainer_state_json_of_a_hugging_face_style_script(tmp_path):
    runs, run_dir, out = run_job(tmp_path, "hfstyle", "hf_style.py", ["--steps", "12"], 1)
    state = json.loads((tmp_path / "work" / "out" / "trainer_state.json").read_text())
    logged = [(e["step"], e["loss"]) for e in state["log_history"] if "loss" in e]
    # The file's steps (2, 4, ... 12), not the 6 printed dicts counted: the file wins over the prints.
    assert re.search(r"progress: ended at step 12/\?", out), out[-2000:]
    plotted(runs, run_dir)
    reader = RunSeries(run_dir)
    reader.poll_all()
    assert reader.origins() == {0: "trainer_state"}
    [zero] = reader.series()
    assert list(zip(zero.counts, zero.loss, strict=True)) == logged
    assert read_metrics(run_dir).step == 12


def test_lightning_csv_logger_of_a_two_process_cpu_run(tmp_path):
    runs, run_dir, out = run_job(tmp_path, "lightcsv", "lightning_csv.py", ["--steps", "10"], 2)
    [csv] = (tmp_path / "work" / "lightning_logs").glob("version_*/metrics.csv")
    rows = [line.split(",") for line in csv.read_text().splitlines()]
    at, col = rows[0].index("step"), rows[0].index("train_loss")
    logged = [(int(r[at]), float(r[col])) for r in rows[1:] if r[col]]
    assert len(logged) >= 4
    plotted(runs, run_dir)
    reader = RunSeries(run_dir)
    reader.poll_all()
    assert reader.origins() == {0: "lightning_csv"}  # rank 0 writes the file; rank 1 printed no loss
    [zero] = reader.series()
    assert list(zip(zero.counts, zero.loss, strict=True)) == logged
    assert re.search(rf"progress: ended at step {logged[-1][0]}/\?", out), out[-2000:]


def event_scalars(folder: Path, tag: str) -> list[tuple[int, float]]:
    """(step, value) of ``tag`` in the event files under ``folder``, read with TensorBoard's EventAccumulator
    (another reader of the same package than cockpit's, so the test does not check cockpit against itself)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


@pytest.fixture(scope="module")
def tensorboard_run(tmp_path_factory) -> tuple[Path, Path, Path, str]:
    """(tmp, runs, run directory, `cockpit run`'s output) of one run of tensorboard_ddp.py, read by two tests."""
    tmp = tmp_path_factory.mktemp("tboard")
    return tmp, *run_job(tmp, "tboard", "tensorboard_ddp.py", ["--steps", "12"], 2)


def test_tensorboard_event_files_of_a_two_rank_summarywriter_script(tensorboard_run):
    """Rank 0 writes a default SummaryWriter() into the workdir's runs/, rank 1 its own file into the run
    directory: each rank's loss is its own file's, at the step it logged, and `plot` draws both."""
    tmp, runs, run_dir, out = tensorboard_run
    [zero_dir] = (tmp / "work" / "runs").iterdir()
    logged = {0: event_scalars(zero_dir, "Loss/train"), 1: event_scalars(run_dir / "tb" / "rank-1", "loss")}
    assert [s for s, _ in logged[0]] == list(range(1, 13)) and [s for s, _ in logged[1]] == list(range(1, 13))
    assert re.search(r"progress: ended at step 12/\?", out), out[-2000:]
    chart = plotted(runs, run_dir)
    assert "rank 0" in chart and "rank 1" in chart
    reader = RunSeries(run_dir)
    reader.poll_all()
    assert reader.origins() == {0: "tensorboard", 1: "tensorboard"}
    for series in reader.series():
        assert list(zip(series.counts, series.loss, strict=True)) == logged[series.rank]
    assert read_metrics(run_dir).step == 12


def test_event_files_without_tensorboard_installed_say_how_to_read_them(tensorboard_run):
    """The same run read by a cockpit whose Python cannot import tensorboard (``sys.modules["tensorboard"] =
    None``: what Python does for a package that is not there): `plot` says once where the event files are and
    the pip command, and draws nothing (exit 2), without a traceback."""
    _, runs, run_dir, _ = tensorboard_run
    code = ("import sys; sys.modules['tensorboard'] = None; from cockpit.cli.main import main; "
            f"sys.exit(main(['plot', {str(run_dir)!r}, '--metric', 'loss', '--width', '80', '--height', '20']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                       env=cockpit_env(COCKPIT_RUNS_DIR=str(runs)))
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("pip install tensorboard") == 1, r.stderr
    assert "TensorBoard event files, not read: the tensorboard package is not installed" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr


def test_lightnings_default_logger_with_tensorboard_installed(tmp_path):
    """Trainer(logger=True) with tensorboard installed (the test extra installs it) logs to a TensorBoardLogger:
    `self.log("train_loss")` reaches the charts from its event files, rank 0's."""
    runs, run_dir, out = run_job(tmp_path, "lighttb", "lightning_csv.py", ["--steps", "10", "--logger", "default"], 2)
    [version] = (tmp_path / "work" / "lightning_logs").glob("version_*")
    logged = event_scalars(version, "train_loss")
    assert len(logged) >= 4 and not list(version.glob("metrics.csv"))
    plotted(runs, run_dir)
    reader = RunSeries(run_dir)
    reader.poll_all()
    assert reader.origins() == {0: "tensorboard"}
    [zero] = reader.series()
    assert list(zip(zero.counts, zero.loss, strict=True)) == logged
    assert re.search(rf"progress: ended at step {logged[-1][0]}/\?", out), out[-2000:]
