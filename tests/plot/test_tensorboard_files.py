"""TensorBoard event files as a run's metrics (cockpit.plot.tensorboard_files): which files are the run's, which
rank each is, which scalar is the loss, that a poll reads only what was appended, and what a damaged file or a
missing package costs. The files are written by torch.utils.tensorboard.SummaryWriter, as scripts write them;
the run directory with cockpit's own store."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from torch.utils.tensorboard import SummaryWriter

from cockpit.plot import tensorboard_files
from cockpit.plot.source import RunSeries
from cockpit.plot.tensorboard_files import event_file, loss_rank, training_dir
from cockpit.run.status import RunStatus
from cockpit.run.store import write_status


def run_now(tmp: Path, work: Path) -> Path:
    """A running run with ``work`` as its workdir, started a minute ago (event files carry the time they were
    begun: now)."""
    run_dir = tmp / "runs" / "r-1"
    run_dir.mkdir(parents=True)
    job = tmp / "job.yaml"
    job.write_text(f"name: r\nscript: train.py\nlauncher: local\ngpus: none\nworkdir: {work}\n")
    (run_dir / "job.yaml").write_text(job.read_text())
    write_status(run_dir, RunStatus(run_id="r-1", name="r", launcher="local", job_file=str(job), hosts=["vm"],
                                    world_size=2, state="running", started=time.time() - 60))
    return run_dir


def write(folder: Path, scalars: dict[str, list[tuple[int, float]]]) -> Path:
    writer = SummaryWriter(str(folder))
    for tag, points in scalars.items():
        for step, value in points:
            writer.add_scalar(tag, value, step)
    writer.close()
    [path] = [p for p in folder.iterdir() if p.name.startswith("events.out.tfevents.")]
    return path


def pid_record(run_dir: Path, rank: int, pid: int) -> None:
    (run_dir / "logs").mkdir(exist_ok=True)
    (run_dir / "logs" / f"rank-{rank}.vm.pid").write_text(f"{pid}\n")


def test_names_tags_and_folders():
    assert event_file("events.out.tfevents.1732766400.node-1.cluster.local.4242.0") == (
        1732766400.0, "node-1.cluster.local", 4242)
    assert event_file("events.out.tfevents.1732766400.vm.17.3.v2") == (1732766400.0, "vm", 17)
    assert event_file("events.out.tfevents.txt") is None and event_file("metrics.csv") is None
    assert [loss_rank(t) for t in ("loss", "Loss/train", "training loss", "train/loss", "lr", "val_loss")] == [
        0, 3, 5, 2, None, None]
    assert training_dir("runs/May01_host") and training_dir("lightning_logs/version_0")
    assert not training_dir("runs/x/val") and not training_dir("eval") and not training_dir("tb/test-set")
    assert training_dir("runs/interval") and training_dir("contest")  # a word, not a part of one


def test_a_writer_without_a_ranks_pid_is_rank_0_and_read_incrementally(tmp_path):
    work = tmp_path / "work"
    folder = work / "runs" / "Nov28_host"
    write(folder, {"Loss/train": [(1, 0.9), (2, 0.8)], "lr": [(1, 0.1), (2, 0.1)]})
    write(work / "runs" / "Nov28_host" / "val", {"loss": [(2, 5.0)]})  # a validation writer: not the training loss
    run_dir = run_now(tmp_path, work)
    reader = RunSeries(run_dir)
    reader.poll_all()
    assert reader.origins() == {0: "tensorboard"}
    [zero] = reader.series()
    assert zero.counts == (1, 2) and zero.loss == pytest.approx((0.9, 0.8))
    assert zero.times[0] <= zero.times[1] <= time.time()  # the events' own wall times
    writer = SummaryWriter(str(folder))  # a second file in the same folder, as a resumed writer makes
    writer.add_scalar("Loss/train", 0.7, 3)
    writer.flush()
    reader._tensorboard._scanned = -tensorboard_files.RESCAN  # the next poll walks again (else within 5 s)
    assert reader.poll()
    [zero] = reader.series()
    assert zero.counts == (1, 2, 3)
    assert not reader.poll()  # nothing appended: nothing read
    writer.close()


def test_a_ranks_own_writer_is_that_ranks_and_others_not_the_runs(tmp_path):
    work = tmp_path / "work"
    run_dir = run_now(tmp_path, work)
    mine = write(run_dir / "tb" / "rank-1", {"loss": [(1, 2.0), (2, 1.5)]})
    pid_record(run_dir, 0, 999_999)
    pid = event_file(mine.name)[2]
    pid_record(run_dir, 1, pid)
    other = work / "runs" / "another"  # a file no rank of this run wrote (another run sharing the workdir)
    other.mkdir(parents=True)
    (other / f"events.out.tfevents.{int(time.time())}.vm.{pid + 1}.0").write_bytes(mine.read_bytes())
    reader = RunSeries(run_dir)
    reader.poll_all()
    assert reader.origins() == {1: "tensorboard"}
    [one] = reader.series()
    assert one.rank == 1 and one.counts == (1, 2) and one.loss == (2.0, 1.5)


def test_the_most_specific_loss_tag_and_an_earlier_runs_file(tmp_path):
    work = tmp_path / "work"
    old = write(work / "runs" / "old", {"loss": [(1, 9.0)]})
    os.rename(old, old.with_name(old.name.replace(old.name.split(".")[3], str(int(time.time()) - 3600))))
    write(work / "lightning_logs" / "version_0", {"train_loss_step": [(1, 3.0), (3, 2.0)], "loss": [(1, 4.0)]})
    reader = RunSeries(run_now(tmp_path, work))
    reader.poll_all()
    [zero] = reader.series()
    assert zero.counts == (1,) and zero.loss == (4.0,)  # "loss" before "train_loss_step"; not the old run's 9.0


def test_a_record_whose_checksum_fails_ends_what_is_read(tmp_path):
    work = tmp_path / "work"
    path = write(work / "runs" / "x", {"loss": [(1, 1.0), (2, 0.5)]})
    data = bytearray(path.read_bytes())
    data[-6] ^= 0xFF  # the last record's payload: its checksum no longer matches
    path.write_bytes(bytes(data))
    reader = RunSeries(run_now(tmp_path, work))
    reader.poll_all()
    [zero] = reader.series()
    assert zero.counts == (1,)  # what came before it; tensorboard waits there (a writer may be mid-record)


def test_a_record_that_is_not_an_event_is_said_and_the_file_read_no_further(tmp_path):
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    work = tmp_path / "work"
    path = write(work / "runs" / "x", {"loss": [(1, 1.0)]})
    junk = b"\xff" * 16  # framed and checksummed as a record, but no Event
    header = struct.pack("<Q", len(junk))
    with open(path, "ab") as f:
        f.write(header + struct.pack("<I", masked_crc32c(header)) + junk + struct.pack("<I", masked_crc32c(junk)))
    reader = RunSeries(run_now(tmp_path, work))
    reader.poll_all()
    [zero] = reader.series()
    assert zero.counts == (1,)
    [(where, why)] = reader.skipped()
    assert where == path and why.startswith("TensorBoard event file not read past a damaged record"), why


def test_a_fifo_with_an_event_files_name_is_not_opened(tmp_path):
    work = tmp_path / "work"
    (work / "runs").mkdir(parents=True)
    os.mkfifo(work / "runs" / f"events.out.tfevents.{int(time.time())}.vm.1.0")
    reader = RunSeries(run_now(tmp_path, work))
    reader.poll_all()  # returns: a FIFO is never waited on
    assert reader.origins() == {}


def test_tf2_style_tensor_scalars_are_read_too(tmp_path):
    work = tmp_path / "work"
    writer = SummaryWriter(str(work / "runs" / "x"))
    for step, value in ((1, 0.75), (2, 0.5)):
        writer.add_scalar("train/loss", value, step, new_style=True)  # a scalar tensor, as tf.summary.scalar
    writer.add_histogram("loss", np.array([1.0, 2.0, 3.0]), 1)  # a loss-named histogram: not a scalar
    writer.close()
    reader = RunSeries(run_now(tmp_path, work))
    reader.poll_all()
    [zero] = reader.series()
    assert zero.counts == (1, 2) and zero.loss == (0.75, 0.5)


def test_a_poll_reads_a_bounded_number_of_events_and_the_next_goes_on_from_there(tmp_path, monkeypatch):
    work = tmp_path / "work"
    write(work / "runs" / "x", {"loss": [(s, 1 / s) for s in range(1, 11)]})
    monkeypatch.setattr(tensorboard_files, "MAX_EVENTS", 3)  # 10 events (and the file's version record) in 4 polls
    reader = RunSeries(run_now(tmp_path, work))
    polls = 0
    while reader.poll():
        polls += 1
    [zero] = reader.series()
    assert zero.counts == tuple(range(1, 11)) and polls == 4  # none lost or read twice at a poll's end


def test_a_forecast_reads_event_files_whole_or_not_at_all(tmp_path, monkeypatch):
    from cockpit.insight import forecast_inputs

    work = tmp_path / "work"
    write(work / "runs" / "x", {"loss": [(s, 1 / s) for s in range(1, 11)]})
    run_dir = run_now(tmp_path, work)
    assert forecast_inputs.read_metrics(run_dir).step == 10
    monkeypatch.setattr(tensorboard_files, "MAX_EVENTS", 2)  # 4 reads of 2: not the whole file
    assert forecast_inputs.read_metrics(run_dir).step is None  # its first steps say nothing of where it is
