"""A training script for the tests: the demo's loop plus what a test needs to look inside.

It records which sample indices this rank saw, writes each rank's final parameters, can sleep per step (so a
test can signal it mid-run) and can send itself SIGUSR1 at a given step. It uses dropout and AdamW so a
resume is exact only if the RNG and optimizer states are restored too.

Writes under $COCKPIT_RUN_DIR/probe/ (or --out/probe/): pid-rank<R> at start; at the end, rank-<R>.json with
{"indices": [...], "steps": N, "resumed_step": S or null} and params-rank<R>.pt (the whole unwrapped
state_dict, gathered under fsdp).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import Dataset

from cockpit.train import Runtime


class Indexed(Dataset):
    """Synthetic regression data that also returns each sample's index."""

    def __init__(self, size: int, features: int) -> None:
        g = torch.Generator().manual_seed(99)
        self.x = torch.randn(size, features, generator=g)
        self.y = self.x.sum(dim=1, keepdim=True).sin()

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        return self.x[i], self.y[i], i


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--steps-per-epoch", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--signal-at", type=int, default=None, help="rank 0 sends itself SIGUSR1 after this step")
    p.add_argument("--kill-at", type=int, default=None, help="rank 1 SIGKILLs itself after this many steps")
    p.add_argument("--checkpoint-every", type=int, default=0)
    p.add_argument("--out", default=None, help="where probe/ goes (default: $COCKPIT_RUN_DIR)")
    args = p.parse_args()

    rt = Runtime.from_env(checkpoint_every=args.checkpoint_every)
    out = Path(args.out or os.environ["COCKPIT_RUN_DIR"]) / "probe"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"pid-rank{rt.rank}").write_text(str(os.getpid()))

    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    wrapped, optimizer = rt.setup(model, optimizer)
    dataset = Indexed(args.steps_per_epoch * args.batch_size * rt.world_size, 16)
    loader = rt.loader(dataset, batch_size=args.batch_size)

    seen: list[int] = []
    for _epoch in rt.epochs(args.epochs):
        for x, y, idx in rt.batches(loader):
            if rt.rank == 1 and rt.position.step == args.kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            seen += idx.tolist()
            with rt.autocast():
                loss = nn.functional.mse_loss(wrapped(x).float(), y)
            rt.backward(loss, optimizer)
            if args.signal_at is not None and rt.is_main and rt.position.step + 1 == args.signal_at:
                os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(args.step_sleep)
            rt.step(loss, samples=len(x))

    resumed = rt.resumed_from.step if rt.resumed_from else None
    report = {"indices": seen, "steps": rt.position.step, "resumed_step": resumed}
    (out / f"rank-{rt.rank}.json").write_text(json.dumps(report))
    params = rt.full_state_dict()  # under fsdp a collective that gathers the shards
    torch.save(params, out / f"params-rank{rt.rank}.pt")
    rt.finish()


if __name__ == "__main__":
    main()
