"""A script's own metrics reach `cockpit plot` and the run's progress line without changing the script: real
scripts (tests/plot/scripts/) run through `cockpit run` under the local launcher: a plain gloo DDP script that
prints ``step N loss=X`` (2 ranks), a Hugging Face style script that writes ``trainer_state.json`` (and prints
the Trainer's log dicts, which must lose to the file), and a Lightning script on CPU with 2 processes whose
CSVLogger writes ``lightning_logs/version_0/metrics.csv``. Each: the loss chart draws, and the summary's
progress line has the steps the script logged."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import REPO
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
