"""The runtime's parts in one process: checkpoint files and RNG states, the resumable sampler, precision
(fp16 with its scaler on the CPU, autocast in DataParallel's replica threads), FSDP units, metrics lines and
stop requests."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.train import checkpoint as ckpt
from cockpit.train.data import ShardSampler, make_loader, shard_sampler, to_device
from cockpit.train.fsdp import units
from cockpit.train.metrics import MetricsWriter, progress_line
from cockpit.train.precision import DTYPES, AutocastForward, Precision, cpu_fp16_problem
from cockpit.train.stop import StopRequest, requeue_command


def _draws() -> tuple[list[float], list[float], list[float]]:
    return torch.rand(3).tolist(), np.random.rand(3).tolist(), [random.random() for _ in range(3)]


def test_rng_state_round_trips_through_a_weights_only_checkpoint(tmp_path: Path) -> None:
    torch.manual_seed(1), np.random.seed(1), random.seed(1)
    _draws()
    ckpt.save_atomic({"format": ckpt.FORMAT, "rng": [ckpt.rng_state()]}, tmp_path)
    expected = _draws()
    loaded = ckpt.load_latest(tmp_path)  # weights_only=True inside
    assert loaded is not None
    ckpt.set_rng_state(loaded["rng"][0])
    assert _draws() == expected


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path: Path) -> None:
    for step in range(3):
        ckpt.save_atomic({"format": ckpt.FORMAT, "step": step}, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [ckpt.LATEST]
    assert ckpt.load_latest(tmp_path)["step"] == 2


def test_a_failed_save_keeps_the_previous_checkpoint(tmp_path: Path) -> None:
    ckpt.save_atomic({"format": ckpt.FORMAT, "step": 1}, tmp_path)
    with pytest.raises(Exception):  # noqa: B017 - pickling a lambda fails inside torch.save
        ckpt.save_atomic({"format": ckpt.FORMAT, "step": 2, "bad": lambda: 0}, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [ckpt.LATEST]
    assert ckpt.load_latest(tmp_path)["step"] == 1


def test_load_latest_without_a_checkpoint_is_none_and_a_bad_one_says_where(tmp_path: Path) -> None:
    assert ckpt.load_latest(tmp_path) is None
    (tmp_path / ckpt.LATEST).write_bytes(b"not a checkpoint")
    with pytest.raises(RuntimeError, match=r"(?s)latest\.pt.*hint"):
        ckpt.load_latest(tmp_path)


@settings(max_examples=40, deadline=None)
@given(size=st.integers(1, 60), world=st.integers(1, 4), seed=st.integers(0, 5), epoch=st.integers(0, 3),
       start=st.integers(0, 20))
def test_sampler_shards_are_disjoint_and_a_start_offset_skips_a_prefix(
    size: int, world: int, seed: int, epoch: int, start: int
) -> None:
    data = list(range(size))
    shards = []
    for rank in range(world):
        s = ShardSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=seed, drop_last=True)
        s.set_position(epoch, 0)
        full = list(s)
        s.set_position(epoch, start)
        assert list(s) == full[start:] and len(s) == len(full[start:])
        shards.append(set(full))
    assert sum(len(x) for x in shards) == len(set().union(*shards))  # no sample on two ranks


def test_loader_rejects_a_sampler_and_batches_need_a_runtime_loader() -> None:
    data = torch.utils.data.TensorDataset(torch.arange(8.0))
    with pytest.raises(TypeError, match="set by the runtime"):
        make_loader(data, batch_size=2, rank=0, world_size=1, seed=0, sampler=None)
    with pytest.raises(TypeError, match=r"rt\.loader"):
        shard_sampler(torch.utils.data.DataLoader(data))


def test_iterating_a_runtime_loader_leaves_the_global_rng_alone() -> None:
    data = torch.utils.data.TensorDataset(torch.arange(8.0))
    loader = make_loader(data, batch_size=2, rank=0, world_size=1, seed=0)
    torch.manual_seed(0)
    expected = torch.rand(1)
    torch.manual_seed(0)
    list(loader)
    assert torch.equal(torch.rand(1), expected)


def test_to_device_walks_containers() -> None:
    batch = {"a": (torch.ones(1), [torch.zeros(1)]), "n": 3}
    moved = to_device(batch, torch.device("cpu"))
    assert moved["n"] == 3 and isinstance(moved["a"], tuple) and isinstance(moved["a"][1], list)


def test_bf16_autocast_on_cpu_and_fp32_without() -> None:
    lin = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    with Precision("bf16", torch.device("cpu")).autocast():
        assert lin(x).dtype == torch.bfloat16
    with Precision("fp32", torch.device("cpu")).autocast():
        assert lin(x).dtype == torch.float32
    assert Precision("bf16", torch.device("cpu")).state_dict() is None


def test_backward_and_step_updates_and_zeroes_grads() -> None:
    lin = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    before = lin.weight.detach().clone()
    Precision("fp32", torch.device("cpu")).backward_and_step(lin(torch.ones(1, 2)).sum(), opt)
    assert not torch.equal(before, lin.weight) and lin.weight.grad is None


def test_metrics_lines_are_json_with_the_contract_keys(tmp_path: Path) -> None:
    path = tmp_path / "metrics" / "rank-1.jsonl"
    writer = MetricsWriter(path, rank=1)
    writer.write(step=1, epoch=0, loss=0.5, samples_per_s=10.0)
    assert json.loads(path.read_text())["loss"] == 0.5  # readable before close: flushed per line
    writer.close()
    writer.close()
    line = json.loads(path.read_text())
    assert set(line) == {"step", "epoch", "loss", "samples_per_s", "time", "rank", "cpu_s"} and line["rank"] == 1
    assert progress_line(step=3, epoch=1, loss=0.25, samples_per_s=12.0) == (
        "[cockpit] step=3 epoch=1 loss=0.250000 samples/s=12.0")


def test_metrics_cpu_seconds_count_the_work_between_records(tmp_path: Path) -> None:
    """cpu_s is the process's CPU time: it grows by what the rank computed, not by time spent waiting."""
    writer = MetricsWriter(tmp_path / "rank-0.jsonl", rank=0)
    first = writer.write(step=1, epoch=0, loss=1.0, samples_per_s=1.0)
    time.sleep(0.3)  # waiting costs no CPU
    waited = writer.write(step=2, epoch=0, loss=1.0, samples_per_s=1.0)
    spin_until = time.process_time() + 0.3
    while time.process_time() < spin_until:
        pass
    worked = writer.write(step=3, epoch=0, loss=1.0, samples_per_s=1.0)
    writer.close()
    assert waited["cpu_s"] - first["cpu_s"] < 0.15
    assert worked["cpu_s"] - waited["cpu_s"] >= 0.29


def test_stop_request_remembers_the_first_signal() -> None:
    request = StopRequest()
    old = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGTERM)}
    try:
        request.install()
        assert not request.requested
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGTERM)
        assert request.signal_name == "SIGUSR1"
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    assert requeue_command("10_2") == ["scontrol", "requeue", "10_2"]


def test_fp16_on_cpu_scales_skips_an_overflowing_step_and_its_state_round_trips() -> None:
    assert cpu_fp16_problem() is None  # torch 2.13: fp16 autocast and GradScaler("cpu") exist
    lin = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    precision = Precision("fp16", torch.device("cpu"))
    with precision.autocast():
        out = lin(torch.ones(2, 4))
    assert out.dtype == torch.float16
    before = lin.weight.detach().clone()
    precision.backward_and_step(out.float().sum() * float("inf"), opt)  # inf gradients: the step is skipped
    assert torch.equal(before, lin.weight) and precision.state_dict()["scale"] == 2.0**15
    precision.backward_and_step(lin(torch.ones(2, 4)).sum(), opt)
    assert not torch.equal(before, lin.weight)
    fresh = Precision("fp16", torch.device("cpu"))
    fresh.load_state_dict(precision.state_dict())
    assert fresh.state_dict() == precision.state_dict() and fresh.state_dict()["_growth_tracker"] == 1


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_autocast_forward_reaches_a_replica_thread_that_the_callers_autocast_does_not(precision: str) -> None:
    """DataParallel runs each replica in a thread; autocast (on/off and dtype) is thread-local."""
    lin = torch.nn.Linear(4, 4)
    wrapped = AutocastForward(lin, precision, torch.device("cpu"))
    seen: dict[str, torch.dtype] = {}

    def replica() -> None:  # what DataParallel's parallel_apply runs per device
        seen["plain"] = lin(torch.ones(1, 4)).dtype
        seen["wrapped"] = wrapped(torch.ones(1, 4)).dtype

    with Precision(precision, torch.device("cpu")).autocast():
        thread = threading.Thread(target=replica)
        thread.start()
        thread.join()
    assert seen == {"plain": torch.float32, "wrapped": DTYPES[precision]}


def test_fsdp_units_are_the_blocks_of_containers_children_first() -> None:
    inner = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), inner, torch.nn.ModuleList([torch.nn.Linear(2, 2)]))
    got = units(model)
    assert got.index(inner[0]) < got.index(inner)  # fully_shard goes bottom-up
    assert set(map(id, got)) == {id(model[0]), id(inner), id(inner[0]), id(model[2]), id(model[2][0])}
    assert all(not isinstance(m, torch.nn.ReLU) for m in got)  # no parameters: not a unit


def test_a_checkpoint_is_resumed_only_by_the_kind_of_backend_that_wrote_it(tmp_path: Path) -> None:
    ckpt.check_kind(None, True, tmp_path)
    ckpt.check_kind({"sharded": "sharded-000000004"}, True, tmp_path)
    ckpt.check_kind({"model": {}}, False, tmp_path)
    with pytest.raises(RuntimeError, match=r"written under backend fsdp, but this run uses ddp or dp; hint"):
        ckpt.check_kind({"sharded": "sharded-000000004"}, False, tmp_path / ckpt.LATEST)
    with pytest.raises(RuntimeError, match=r"written under backend ddp or dp, but this run uses fsdp"):
        ckpt.check_kind({"model": {}}, True, tmp_path / ckpt.LATEST)


def test_prune_keeps_only_the_shard_directory_latest_names(tmp_path: Path) -> None:
    for step in (4, 8, 12):
        ckpt.sharded_dir(tmp_path, step).mkdir()
    (tmp_path / ckpt.LATEST).write_bytes(b"x")
    ckpt.prune_sharded(tmp_path, keep=ckpt.sharded_dir(tmp_path, 8).name)
    assert sorted(p.name for p in tmp_path.iterdir()) == [ckpt.LATEST, "sharded-000000008"]
