"""Framework files in a run's workdir as rank 0's metrics (cockpit.plot.framework_files): which file is the
run's (a workdir shared by many runs keeps an earlier run's file), what is read of it, and that it is read again
only when it changed. The files are the formats Hugging Face's Trainer and Lightning's CSVLogger write; the
run directory is written with cockpit's own store."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cockpit.plot.framework_files import lightning_csv_points, trainer_state_points
from cockpit.plot.source import RunSeries
from cockpit.run.status import RunStatus
from cockpit.run.store import write_status

START = 1_700_000_000.0


def make_run(tmp: Path, workdir: Path, ended: float | None = None) -> Path:
    run_dir = tmp / "runs" / "r-1"
    run_dir.mkdir(parents=True)
    job = tmp / "job.yaml"
    text = f"name: r\nscript: train.py\nlauncher: local\ngpus: none\nworkdir: {workdir}\n"
    job.write_text(text)
    (run_dir / "job.yaml").write_text(text)
    write_status(run_dir, RunStatus(run_id="r-1", name="r", launcher="local", job_file=str(job), hosts=["vm"],
                                    world_size=1, state="succeeded" if ended else "running", started=START,
                                    ended=ended))
    return run_dir


def state_file(path: Path, steps: range, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    history = [{"loss": 1.0 / s, "learning_rate": 1e-4, "epoch": s / 10, "step": s} for s in steps]
    path.write_text(json.dumps({"global_step": steps[-1], "log_history": history}))
    os.utime(path, (mtime, mtime))


def test_the_runs_own_trainer_state_not_an_earlier_runs(tmp_path):
    work = tmp_path / "work"
    state_file(work / "old" / "trainer_state.json", range(1, 50), START - 3600)  # an earlier run's, same workdir
    state_file(work / "out" / "checkpoint-4" / "trainer_state.json", range(2, 5, 2), START + 40)
    state_file(work / "out" / "checkpoint-8" / "trainer_state.json", range(2, 9, 2), START + 80)
    run_dir = make_run(tmp_path, work, ended=START + 90)
    reader = RunSeries(run_dir)
    reader.poll_all()
    assert reader.origins() == {0: "trainer_state"}
    [zero] = reader.series()
    assert zero.counts == (2, 4, 6, 8) and zero.loss == (0.5, 0.25, 1 / 6, 0.125)
    # no time in the file: from the run's start (step 0) to the file's last write (step 8)
    assert zero.times == pytest.approx((START + 20, START + 40, START + 60, START + 80))
    assert not reader.poll()  # unchanged: not read again


def test_a_file_written_long_after_the_run_ended_is_another_runs(tmp_path):
    work = tmp_path / "work"
    state_file(work / "out" / "trainer_state.json", range(1, 5), START + 10_000)
    reader = RunSeries(make_run(tmp_path, work, ended=START + 90))
    reader.poll_all()
    assert reader.origins() == {} and reader.series() == []


def test_lightnings_csv_in_the_workdir(tmp_path):
    work = tmp_path / "work"
    csv = work / "lightning_logs" / "version_3" / "metrics.csv"
    csv.parent.mkdir(parents=True)
    csv.write_text("epoch,step,train_loss,val_loss\n0,1,0.9,\n0,3,0.7,\n0,3,,0.8\n0,5,0.5,\n0,5")  # a cut row
    reader = RunSeries(make_run(tmp_path, work))
    reader.poll_all()
    assert reader.origins() == {0: "lightning_csv"}
    [zero] = reader.series()
    assert zero.counts == (1, 3, 5) and zero.loss == (0.9, 0.7, 0.5)


@pytest.mark.parametrize("data", [b"", b"not json", b"[]", b'{"log_history": 3}', b'{"log_history": [1, {}]}',
                                  b'{"log_history": [{"step": true, "loss": 1}]}'])
def test_what_is_not_a_trainer_state_gives_no_points(data):
    assert trainer_state_points(data) == []


@pytest.mark.parametrize("data", [b"", b"epoch,step,acc\n0,1,0.5\n", b"epoch,train_loss\n0,0.5\n", b"\xff\xfe,,\n"])
def test_a_csv_without_a_step_and_a_loss_column_gives_no_points(data):
    assert lightning_csv_points(data) == []


def test_the_workdir_walk_is_bounded(tmp_path):
    from cockpit.plot import framework_files as ff

    for d in range(3):
        folder = tmp_path / f"d{d}"
        folder.mkdir()
        for i in range(ff.PER_DIR + 50):
            (folder / f"f{i}").touch()
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "trainer_state.json").touch()
    found = list(ff.walk(tmp_path))
    assert len(found) == 3 * ff.PER_DIR and all(p.parent.name.startswith("d") for p in found)
    # the budget counts every entry seen (the root's 4 folders too), over the whole walk
    assert len(list(ff.walk(tmp_path, budget=[ff.PER_DIR + 10]))) == ff.PER_DIR + 10 - 4
