"""RuntimeConfig from the environment contract: pure rules, no processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cockpit.train.config import ConfigError, config_from_env, first_host, requeue_target


def test_bare_single_process_defaults() -> None:
    cfg = config_from_env({}, cuda_available=False)
    assert (cfg.rank, cfg.local_rank, cfg.world_size, cfg.launcher) == (0, 0, 1, "single")
    assert (cfg.backend, cfg.pg_backend, cfg.precision, cfg.seed) == ("ddp", "gloo", "fp32", 0)
    assert cfg.run_dir is None and cfg.requeue is False and cfg.is_main


def test_bare_torchrun_on_a_gpu_node_defaults_to_nccl() -> None:
    env = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": "h", "MASTER_PORT": "1"}
    cfg = config_from_env(env, cuda_available=True)
    assert (cfg.rank, cfg.local_rank, cfg.world_size, cfg.launcher) == (3, 1, 4, "torchrun")
    assert cfg.pg_backend == "nccl" and not cfg.is_main
    assert cfg.master_addr is None  # torchrun's workers use env://


def test_contract_variables_are_read() -> None:
    env = {"COCKPIT_RUN_DIR": "/runs/a", "COCKPIT_RUN_ID": "a", "COCKPIT_JOB_NAME": "j",
           "COCKPIT_BACKEND": "dp", "COCKPIT_PG_BACKEND": "gloo", "COCKPIT_PRECISION": "BF16",
           "COCKPIT_SEED": "7", "COCKPIT_REQUEUE": "1"}
    cfg = config_from_env(env, cuda_available=False)
    assert cfg.run_dir == Path("/runs/a") and cfg.run_id == "a" and cfg.job_name == "j"
    assert (cfg.backend, cfg.precision, cfg.seed, cfg.requeue) == ("dp", "bf16", 7, True)
    assert not cfg.distributed


def test_overrides_win_over_the_environment() -> None:
    cfg = config_from_env({"COCKPIT_SEED": "7"}, cuda_available=False, seed=3, run_dir="/x")
    assert cfg.seed == 3 and cfg.run_dir == Path("/x")
    assert config_from_env({"COCKPIT_SEED": "7"}, cuda_available=False, seed=None).seed == 7


def test_slurm_fallback_reads_procid_and_derives_the_rendezvous() -> None:
    env = {"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8", "SLURM_JOB_ID": "4242",
           "SLURM_JOB_NODELIST": "gpu[07-08]"}
    cfg = config_from_env(env, cuda_available=False)
    assert (cfg.rank, cfg.local_rank, cfg.world_size, cfg.launcher) == (5, 1, 8, "slurm")
    assert (cfg.master_addr, cfg.master_port) == ("gpu07", 12000 + 4242)
    assert cfg.slurm_job_id == "4242"


def test_torchrun_variables_beat_slurm_ones() -> None:
    env = {"RANK": "1", "WORLD_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}
    assert config_from_env(env, cuda_available=False).launcher == "torchrun"


@pytest.mark.parametrize(("env", "expected"), [
    ({"SLURM_JOB_ID": "10"}, "10"),
    ({"SLURM_JOB_ID": "12", "SLURM_ARRAY_JOB_ID": "10", "SLURM_ARRAY_TASK_ID": "2"}, "10_2"),
    ({}, None),
])
def test_requeue_target_is_array_aware(env: dict[str, str], expected: str | None) -> None:
    assert requeue_target(env) == expected


@pytest.mark.parametrize(("nodelist", "host"), [
    ("node1", "node1"), ("a,b", "a"), ("gpu[03-05,9],cpu1", "gpu03"), ("x[1,4]", "x1"),
])
def test_first_host(nodelist: str, host: str) -> None:
    assert first_host(nodelist) == host


@pytest.mark.parametrize(("env", "overrides", "needle"), [
    ({"COCKPIT_PRECISION": "fp8"}, {}, "COCKPIT_PRECISION='fp8'"),
    ({"COCKPIT_SEED": "x"}, {}, "COCKPIT_SEED='x' is not an integer"),
    ({"COCKPIT_PG_BACKEND": "nccl"}, {}, "hint: use gloo on CPU"),
    ({"RANK": "2", "WORLD_SIZE": "2"}, {}, "outside world size"),
    ({"RANK": "0", "WORLD_SIZE": "2", "COCKPIT_BACKEND": "dp"}, {}, "dp runs as ONE process"),
    ({"COCKPIT_BACKEND": "fsdp", "COCKPIT_PG_BACKEND": "nccl"}, {}, "hint: use gloo on CPU"),
    ({}, {"sede": 1}, "unknown override"),
    ({}, {"log_every": -1}, "negative"),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"}, {}, "MASTER_ADDR"),
])
def test_errors_name_the_variable_and_give_a_hint(env: dict, overrides: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        config_from_env(env, cuda_available=False, **overrides)
    assert needle in str(info.value)


@given(st.integers(min_value=1, max_value=512), st.data())
def test_any_valid_torchrun_rank_is_accepted(world: int, data: st.DataObject) -> None:
    rank = data.draw(st.integers(min_value=0, max_value=world - 1))
    cfg = config_from_env({"RANK": str(rank), "WORLD_SIZE": str(world)}, cuda_available=False)
    assert (cfg.rank, cfg.world_size, cfg.is_main) == (rank, world, rank == 0)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_16_bit_is_accepted_on_cpu_with_every_backend(precision: str) -> None:
    for backend, env in (("ddp", {"RANK": "1", "WORLD_SIZE": "2"}), ("fsdp", {"RANK": "1", "WORLD_SIZE": "2"}),
                         ("dp", {})):
        cfg = config_from_env({**env, "COCKPIT_BACKEND": backend, "COCKPIT_PRECISION": precision},
                              cuda_available=False)
        assert (cfg.backend, cfg.precision, cfg.distributed) == (backend, precision, backend != "dp")
