"""Printed progress lines as metrics (cockpit.plot.printed) and the reader seam that feeds them to the charts
(cockpit.plot.sources through cockpit.plot.source.RunSeries): the forms scripts print are read; the real log
text of the fixtures (NCCL, torchrun, elastic, Slurm, cockpit's own runs) invents nothing; a log is read on
from where the last poll ended; cockpit's own metrics file wins over a rank's prints, even when it comes later."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest
from helpers import REPO

from cockpit.insight.forecast_inputs import read_metrics
from cockpit.plot.printed import read_line
from cockpit.plot.source import RunSeries
from cockpit.plot.sources import printed_tail

FIXTURES = REPO / "tests" / "fixtures"


@pytest.mark.parametrize(("line", "loss", "step"), [
    ("step 10 loss=2.31 lr=0.001", 2.31, 10),
    ("Epoch 1 | step 20 | loss: 1.92", 1.92, 20),
    ("{'loss': 0.53, 'grad_norm': 1.1, 'learning_rate': 4e-05, 'epoch': 0.5}", 0.53, None),  # HF Trainer
    ('{"train_loss": 0.7, "global_step": 30}', 0.7, 30),
    ("it: 7 | train/loss=3.5e-01", 0.35, 7),
    ("[rank1]: iteration 40 loss: 0.125 tokens/s: 1200", 0.125, 40),
    ("epoch 3 loss=0.5 12.3it/s", 0.5, None),  # "it/s" is a rate, not a step
    ("lightning: rank 0 epoch 1 step 16 loss 0.1234", 0.1234, 16),  # a spaced loss beside its step
    ("plain: rank 1 step 20 loss 2.5e-01", 0.25, 20),
])
def test_progress_forms_are_read(line, loss, step):
    reading = read_line(line)
    assert reading is not None and reading.loss == pytest.approx(loss) and reading.step == step


def test_a_diverged_loss_is_read_as_it_is():
    reading = read_line("step 9 loss=nan")
    assert reading is not None and math.isnan(reading.loss) and reading.step == 9


@pytest.mark.parametrize("line", [
    "exitcode  : 1 (pid: 1234)",                       # torchrun's failure table
    "rank      : 0 (local_rank: 0)",
    "NCCL INFO comm 0x55d rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
    "{'lr': 0.001, 'batch': 8}",                      # a config dump
    "{'eval_loss': 0.4, 'eval_runtime': 0.2, 'epoch': 1.0}",  # evaluation: not the training loss
    "{'train_runtime': 12.5, 'train_samples_per_second': 80.0, 'train_loss': 0.61, 'epoch': 1.0}",  # HF's summary
    "Epoch 0:  50%|█████     | 5/10 [00:00<00:00, 12.3it/s, v_num=0, train_loss=0.512]",  # a bar's frame
    "the loss 0.1234 was fine at epoch 3",            # a spaced loss with no step on its line is prose
    "step 16 eval_loss 0.4",                           # a spaced loss must be the training loss
    "step 16 loss 0.1234abc",
    "see foo.loss=3 in the config",                    # a key inside a dotted name
    "",
])
def test_ordinary_lines_yield_nothing(line):
    assert read_line(line) is None


def fixture_lines() -> dict[str, list[str]]:
    out = {}
    for path in sorted(FIXTURES.rglob("*")):
        if path.suffix in (".log", ".txt", ".out") and path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            out[str(path.relative_to(FIXTURES))] = [s for line in text.split("\n") for s in line.split("\r")]
    return out


def test_the_corpus_of_real_logs_yields_only_its_two_training_progress_logs():
    """Thousands of real lines (NCCL, torchrun and elastic failures, Slurm, ip/ss output, cockpit's own runs):
    only the two logs that print a training loss give readings, and those carry the step the line names."""
    lines = fixture_lines()
    assert sum(len(v) for v in lines.values()) > 5000
    read = {name: [(s, r) for s in v if (r := read_line(s))] for name, v in lines.items()}
    found = {name for name, hits in read.items() if hits}
    assert found == {"nccl2/heldout/b_diloco_two_rank_step_progress_info_only_truncated_first_timestamp.log",
                     "nccl3/dev/rich_progress_bar_glued_terminate_c10_error_cuda_unknown_error_mid_training.log"}
    for name in found:
        for line, reading in read[name]:
            step, loss = re.search(r"step: (\d+),? loss: ([\d.]+)", line).groups()
            assert (reading.step, reading.loss) == (int(step), float(loss))


def log(run: Path, rank: int, text: str, mode: str = "a") -> Path:
    (run / "logs").mkdir(parents=True, exist_ok=True)
    path = run / "logs" / f"rank-{rank}.vm.log"
    with open(path, mode) as f:
        f.write(text)
    return path


def test_a_log_is_read_on_from_where_the_last_poll_ended(tmp_path):
    path = log(tmp_path, 0, "hello\nstep 1 loss=4.0\nstep 2 loss=3.0\nstep 3 lo")
    reader = RunSeries(tmp_path)
    assert reader.poll()
    assert reader.series()[0].counts == (1, 2)
    # Bytes already read are not read again: overwriting them (same size) changes nothing ...
    data = path.read_bytes()
    path.write_bytes(data.replace(b"loss=4.0", b"loss=9.0"))
    assert not reader.poll()
    log(tmp_path, 0, "ss=2.5\nstep 4 loss=2.0\n")  # ... and the half line is completed by the next write
    assert reader.poll()
    [zero] = reader.series()
    assert zero.counts == (1, 2, 3, 4) and zero.loss == (4.0, 3.0, 2.5, 2.0)


def test_lines_without_a_step_are_counted_per_rank(tmp_path):
    log(tmp_path, 0, "{'loss': 1.0, 'epoch': 0.1}\nnoise: 5\n{'loss': 0.9, 'epoch': 0.2}\n")
    log(tmp_path, 1, "loss=2.0\n")
    reader = RunSeries(tmp_path)
    reader.poll_all()
    assert [(s.rank, s.counts, s.loss) for s in reader.series()] == [(0, (1, 2), (1.0, 0.9)), (1, (1,), (2.0,))]


def test_a_lines_time_lies_between_the_ranks_start_and_the_logs_last_write(tmp_path):
    path = log(tmp_path, 0, "".join(f"step {i} loss={1 / i}\n" for i in range(1, 11)))
    pid = tmp_path / "logs" / "rank-0.vm.pid"
    pid.write_text("123\n")
    os.utime(pid, (1_700_000_000, 1_700_000_000))
    os.utime(path, (1_700_000_100, 1_700_000_100))
    reader = RunSeries(tmp_path)
    reader.poll_all()
    [zero] = reader.series()
    assert 1_700_000_000 < zero.times[0] < zero.times[-1] == pytest.approx(1_700_000_100)
    assert list(zero.times) == sorted(zero.times)
    [(_, rate)] = zero.rate(at_most=1)
    assert rate == pytest.approx(9 / (zero.times[-1] - zero.times[0]))


def metrics(run: Path, rank: int, steps: range) -> None:
    (run / "metrics").mkdir(parents=True, exist_ok=True)
    with open(run / "metrics" / f"rank-{rank}.jsonl", "a") as f:
        for s in steps:
            f.write(json.dumps({"step": s, "time": 1_700_000_000 + s, "loss": 100.0 + s}) + "\n")


def test_cockpits_own_metrics_win_over_printed_lines_even_when_they_come_later(tmp_path):
    log(tmp_path, 0, "".join(f"step {i} loss=1.5\n" for i in range(5)))
    log(tmp_path, 1, "".join(f"step {i} loss=2.5\n" for i in range(5)))
    reader = RunSeries(tmp_path)
    reader.poll_all()
    assert reader.origins() == {0: "printed", 1: "printed"}
    metrics(tmp_path, 0, range(3))
    reader.poll_all()
    assert reader.origins() == {0: "metrics", 1: "printed"}
    zero, one = reader.series()
    assert zero.loss == (100.0, 101.0, 102.0) and set(one.loss) == {2.5}
    log(tmp_path, 0, "step 9 loss=0.1\n")  # rank 0's prints are no longer read
    assert not reader.poll()
    assert reader.series()[0].counts == (0, 1, 2)


def test_a_forecast_reads_the_end_of_a_long_log_only(tmp_path):
    """Bounded however long the log: the last ``tail`` bytes, the lines in it that name their step (a counted
    line's count is not known from a tail); all lines of a log no longer than the tail."""
    log(tmp_path, 0, "".join(f"step {i} loss={1 / i:.5f}\n{{'loss': 0.5}}\n" for i in range(1, 2001)))
    points = printed_tail(tmp_path, 0, tail=1000)
    assert [p[0] for p in points] == list(range(2001 - len(points), 2001)) and 20 < len(points) < 50
    assert read_metrics(tmp_path).step == 2000
    log(tmp_path, 1, "{'loss': 0.5}\n{'loss': 0.4}\nloss=0.3\n")
    assert [(p[0], p[2]) for p in printed_tail(tmp_path, 1, tail=1000)] == [(1, 0.5), (2, 0.4), (3, 0.3)]
    assert read_metrics(tmp_path, 1).step == 3 and read_metrics(tmp_path, 1).last_loss == 0.3


def test_a_log_replaced_by_a_shorter_one_is_read_again_from_its_start(tmp_path):
    path = log(tmp_path, 0, "".join(f"step {i} loss=1.0\n" for i in range(1, 30)))
    os.utime(path, (1_700_000_100, 1_700_000_100))
    reader = RunSeries(tmp_path)
    reader.poll_all()
    log(tmp_path, 0, "step 1 loss=0.5\nstep 2 loss=0.25\n", mode="w")
    os.utime(path, (1_700_000_200, 1_700_000_200))
    assert reader.poll()
    [zero] = reader.series()
    assert zero.loss[:2] == (0.5, 0.25) and zero.times[1] == pytest.approx(1_700_000_200)
    assert all(t <= 1_700_000_200 for t in zero.times)


def test_a_poll_of_some_ranks_reads_only_their_printed_lines(tmp_path):
    """The side panel's poll of a few ranks (RunSeries.poll(only)) reads no other rank's log: the printed
    lines of 4,096 logs each second held the TUI's GIL. A later poll of all reads the rest whole."""
    for rank in range(4):
        log(tmp_path, rank, "".join(f"step {i} loss={1 / i}\n" for i in range(1, 6)))
    reader = RunSeries(tmp_path)
    assert reader.poll(only={1}) and reader.ranks() == [1]
    assert reader.poll() and reader.ranks() == [0, 1, 2, 3] and reader.series([2])[0].counts == (1, 2, 3, 4, 5)
