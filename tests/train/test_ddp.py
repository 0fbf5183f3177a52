"""Real 2-rank DDP runs (gloo on CPU): identical parameters, disjoint data shards, metrics per rank."""

from __future__ import annotations

import subprocess
import sys

import torch

from cockpit.train.metrics import metrics_path

EPOCHS, STEPS, BATCH = 2, 10, 8


def test_two_ranks_end_identical_see_disjoint_shards_and_write_metrics(runner, paths) -> None:
    args = ["--epochs", str(EPOCHS), "--steps-per-epoch", str(STEPS), "--batch-size", str(BATCH)]
    done = runner.torchrun("ddp", paths["probe"], args)
    assert done.returncode == 0, done.stdout
    for rank in (0, 1):
        assert f"[cockpit] start rank={rank} world=2" in done.stdout
        assert f"[cockpit] finish rank={rank} step={EPOCHS * STEPS} exit_code=0" in done.stdout

    run = runner.run_dir("ddp")
    p0, p1 = (torch.load(run / "probe" / f"params-rank{r}.pt") for r in (0, 1))
    assert p0 and p0.keys() == p1.keys(), (sorted(p0), sorted(p1))  # the all() below is over something
    assert all(torch.equal(p0[k], p1[k]) for k in p0), "parameters differ between ranks"

    size = STEPS * BATCH * 2
    seen = [runner.probe_report("ddp", r)["indices"] for r in (0, 1)]
    per_epoch = STEPS * BATCH
    for epoch in range(EPOCHS):
        shard0 = set(seen[0][epoch * per_epoch:(epoch + 1) * per_epoch])
        shard1 = set(seen[1][epoch * per_epoch:(epoch + 1) * per_epoch])
        assert not shard0 & shard1, f"epoch {epoch}: a sample went to both ranks"
        assert shard0 | shard1 == set(range(size)), f"epoch {epoch}: samples missing"
    assert seen[0][:per_epoch] != seen[0][per_epoch:], "the shuffle did not change between epochs"

    for rank in (0, 1):
        lines = runner.metrics("ddp", rank)
        assert metrics_path(run, rank).name == f"rank-{rank}.jsonl"
        assert [m["step"] for m in lines] == list(range(1, EPOCHS * STEPS + 1))
        assert {m["rank"] for m in lines} == {rank}
        assert all(m["samples_per_s"] > 0 and m["loss"] >= 0 for m in lines)
        assert [m["epoch"] for m in lines] == [s // STEPS for s in range(EPOCHS * STEPS)]


def test_slurm_fallback_starts_two_ranks_without_torchrun(runner, paths, free_port_number) -> None:
    """Two plain processes with only SLURM_* rank variables (a bare `srun`) form one process group."""
    procs = []
    for rank in (0, 1):
        env = runner.env("slurm", SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank), SLURM_NTASKS="2",
                         SLURM_JOB_ID="99", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port_number))
        cmd = [sys.executable, str(paths["probe"]), "--epochs", "1", "--steps-per-epoch", "4"]
        procs.append(runner.start(cmd, env))
    outputs = []
    for proc in procs:
        try:
            outputs.append(proc.communicate(timeout=90)[0])
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
    assert [p.returncode for p in procs] == [0, 0], "\n".join(outputs)
    assert "launcher=slurm" in outputs[0] and "world=2" in outputs[1]
    run = runner.run_dir("slurm")
    p0, p1 = (torch.load(run / "probe" / f"params-rank{r}.pt") for r in (0, 1))
    assert p0 and p0.keys() == p1.keys() and all(torch.equal(p0[k], p1[k]) for k in p0)
