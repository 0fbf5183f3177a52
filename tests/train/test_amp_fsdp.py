"""fp16 with its GradScaler and backend fsdp, as real 2-rank torchrun runs on the CPU (gloo).

One uninterrupted ddp fp16 run is the reference. A ddp and an fsdp fp16 run are killed after step 6 (a
checkpoint every 4 steps) and resumed: each must continue from step 4 and end with the reference's
parameters and scaler state. The scaler matters here: its first scale (2^16) overflows fp16 at step 2, so it
skips that step and halves the scale; a resume that lost the scaler state would start at 2^16 again, skip
another step and end elsewhere. fsdp also shows the loss falling on the demo and its shard directories.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

ARGS = ["--epochs", "2", "--steps-per-epoch", "6", "--batch-size", "8", "--checkpoint-every", "4"]
TOTAL = 12


def _latest(run: Path) -> dict:
    return torch.load(run / "checkpoints" / "latest.pt", weights_only=True)


@pytest.fixture(scope="module")
def reference(runner_at, paths, tmp_path_factory) -> tuple[dict[str, torch.Tensor], dict]:
    """Final rank-0 parameters and scaler state of an uninterrupted 2-rank ddp fp16 run."""
    runner = runner_at(tmp_path_factory.mktemp("amp-reference"))
    done = runner.torchrun("ref", paths["probe"], ARGS, COCKPIT_PRECISION="fp16")
    assert done.returncode == 0, done.stdout
    assert "precision=fp16 device=cpu" in done.stdout
    run = runner.run_dir("ref")
    return torch.load(run / "probe" / "params-rank0.pt"), _latest(run)["scaler"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["ddp", "fsdp"])
def test_fp16_killed_and_resumed_keeps_the_scaler_and_ends_like_an_uninterrupted_run(
    runner, paths, reference, backend: str
) -> None:
    crashed = runner.torchrun(backend, paths["probe"], [*ARGS, "--kill-at", "6"], COCKPIT_PRECISION="fp16",
                              COCKPIT_BACKEND=backend)
    assert crashed.returncode != 0
    run = runner.run_dir(backend)
    at_cut = _latest(run)
    assert at_cut["step"] == 4
    assert at_cut["scaler"]["scale"] == 2.0**15 and at_cut["scaler"]["_growth_tracker"] == 2  # skipped step 2
    if backend == "fsdp":
        assert at_cut["sharded"] == "sharded-000000004" and "model" not in at_cut

    resumed = runner.torchrun(backend, paths["probe"], ARGS, COCKPIT_PRECISION="fp16", COCKPIT_BACKEND=backend)
    assert resumed.returncode == 0, resumed.stdout
    assert f"resumed from {run / 'checkpoints' / 'latest.pt'} step=4" in resumed.stdout
    steps = [m["step"] for m in runner.metrics(backend, 0)]
    assert steps.count(5) == 2 and sorted(set(steps)) == list(range(1, TOTAL + 1))  # 5, 6 redone
    params = [torch.load(run / "probe" / f"params-rank{r}.pt") for r in (0, 1)]
    assert params[0] and params[0].keys() == params[1].keys()  # the all() below is over something
    assert all(torch.equal(params[0][k], params[1][k]) for k in params[0])
    ref_params, ref_scaler = reference
    assert _latest(run)["scaler"] == ref_scaler
    worst = max((ref_params[k] - params[0][k]).abs().max().item() for k in ref_params)
    if backend == "ddp":
        assert worst == 0.0, f"resumed parameters differ from the uninterrupted run by up to {worst}"
    else:  # the same math (2 ranks: the reduce-scatter's mean is the all-reduce's); measured 0.0 on torch 2.13
        assert worst < 1e-6, f"fsdp's parameters differ from ddp's by up to {worst}"
    if backend == "fsdp":
        assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["latest.pt", "sharded-000000012"]


def test_fsdp_demo_on_two_cpu_ranks_learns_and_saves_shards(runner, paths) -> None:
    args = ["--epochs", "2", "--steps-per-epoch", "15", "--hidden", "32", "--layers", "2"]
    done = runner.torchrun("fsdp", paths["demo"], args, COCKPIT_BACKEND="fsdp", COCKPIT_PRECISION="bf16")
    assert done.returncode == 0, done.stdout
    assert "backend=fsdp pg_backend=gloo precision=bf16 device=cpu" in done.stdout
    for rank in (0, 1):
        losses = [m["loss"] for m in runner.metrics("fsdp", rank)]
        assert len(losses) == 30
        assert sum(losses[-5:]) < 0.5 * sum(losses[:5]), losses
    shards = runner.run_dir("fsdp") / "checkpoints" / "sharded-000000030"
    assert (shards / ".metadata").is_file() and len(list(shards.glob("*.distcp"))) == 2  # one file per rank


def test_dp_fp16_runs_with_its_scaler_in_one_process(runner, paths) -> None:
    args = ["--epochs", "1", "--steps-per-epoch", "20", "--hidden", "64"]
    done = runner.python("dp16", paths["demo"], args, COCKPIT_BACKEND="dp", COCKPIT_PRECISION="fp16")
    assert done.returncode == 0, done.stdout
    assert "backend=dp pg_backend=- precision=fp16 device=cpu" in done.stdout
    losses = [m["loss"] for m in runner.metrics("dp16", 0)]
    assert sum(losses[-5:]) < 0.5 * sum(losses[:5]), losses
    assert _latest(runner.run_dir("dp16"))["scaler"]["_growth_tracker"] > 0
