"""cockpit's demo: an MLP learns a fixed random function from synthetic data (no download).

    torchrun --nproc-per-node 2 jobs/demo.py               # DDP on 2 CPU processes (gloo)
    COCKPIT_BACKEND=dp python jobs/demo.py                 # one process, DataParallel
    COCKPIT_RUN_DIR=/tmp/demo torchrun --nproc-per-node 2 jobs/demo.py
                                                           # + metrics/, checkpoints/, resume on restart

`train()` is the whole runtime API; the rest is arguments, data and failure injection (for testing how
cockpit reports a crashed, killed or hung rank).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import torch
from torch import nn
from torch.utils.data import TensorDataset

from cockpit.train import Runtime

DATA_SEED = 1234  # the data is the same on every rank and in every run, whatever --seed says


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--steps-per-epoch", type=int, default=100, help="optimizer steps per epoch per rank")
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=3, help="hidden layers")
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--seed", type=int, default=None, help="overrides COCKPIT_SEED")
    p.add_argument("--checkpoint-every", type=int, default=None, help="steps; default: only on stop")
    p.add_argument("--fail-rank", type=int, default=None, help="rank that fails (with --fail-step)")
    p.add_argument("--fail-step", type=int, default=None, help="fail after this many steps")
    p.add_argument("--fail-mode", choices=("raise", "kill", "hang"), default="raise")
    p.add_argument("--fail-attempts", type=int, default=None, help="the --fail-* options act only in the first K "
                   "attempts of a run (COCKPIT_ATTEMPT < K, the job's recover:), so a relaunch heals it")
    p.add_argument("--slow-rank", type=int, default=None, help="rank that works --slow-ms longer per step "
                   "(a straggler: cockpit plot RUN --metric wait names it)")
    p.add_argument("--slow-ms", type=float, default=30.0)
    return p.parse_args(argv)


def make_dataset(size: int, features: int) -> TensorDataset:
    """x ~ N(0, 1); y = a fixed random 2-layer "teacher" network of x, plus a little noise."""
    g = torch.Generator().manual_seed(DATA_SEED)
    x = torch.randn(size, features, generator=g)
    w1, w2 = torch.randn(features, 64, generator=g), torch.randn(64, 1, generator=g)
    y = torch.tanh(x @ w1 / features**0.5) @ w2 / 8 + 0.01 * torch.randn(size, 1, generator=g)
    return TensorDataset(x, y)


def make_model(features: int, hidden: int, layers: int) -> nn.Module:
    blocks: list[nn.Module] = []
    width = features
    for _ in range(layers):
        blocks += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    return nn.Sequential(*blocks, nn.Linear(width, 1))


def maybe_fail(args: argparse.Namespace, rank: int, steps_done: int) -> None:
    """Failure injection: --fail-rank R --fail-step S [--fail-mode raise|kill|hang] [--fail-attempts K]."""
    if rank != args.fail_rank or steps_done != args.fail_step:
        return
    attempt = int(os.environ.get("COCKPIT_ATTEMPT", "0") or 0)
    if args.fail_attempts is not None and attempt >= args.fail_attempts:
        return
    print(f"[demo] rank {rank}: injecting failure '{args.fail_mode}' after step {steps_done} (attempt "
          f"{os.environ.get('COCKPIT_ATTEMPT', '-')})", flush=True)
    if args.fail_mode == "raise":
        raise RuntimeError(f"injected failure on rank {rank} after step {steps_done} (--fail-mode raise)")
    if args.fail_mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    while True:  # hang: the other ranks block in their next collective
        time.sleep(3600)


def train(args: argparse.Namespace) -> None:
    rt = Runtime.from_env(seed=args.seed, checkpoint_every=args.checkpoint_every)  # None: keep env/default

    model = make_model(args.features, args.hidden, args.layers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model, optimizer = rt.setup(model, optimizer)  # resumes from a checkpoint if the run dir has one

    dataset = make_dataset(args.steps_per_epoch * args.batch_size * rt.world_size, args.features)
    loader = rt.loader(dataset, batch_size=args.batch_size)
    loss_fn = nn.MSELoss()
    start = time.perf_counter()

    for epoch in rt.epochs(args.epochs):
        for x, y in rt.batches(loader):
            maybe_fail(args, rt.rank, rt.position.step)
            if rt.rank == args.slow_rank:
                time.sleep(args.slow_ms / 1000)  # a slow data loader or a throttled GPU on one rank
            with rt.autocast():
                loss = loss_fn(model(x), y)
            rt.backward(loss, optimizer)
            rt.step(loss, samples=len(x))
        rt.print(f"[demo] epoch {epoch} done at step {rt.position.step}")

    rt.print(f"[demo] finished {rt.position.step} steps in {time.perf_counter() - start:.1f}s")
    rt.save_checkpoint()  # so a rerun (or a requeue) of a finished run has nothing left to do
    rt.finish()


def main() -> None:
    """Run, and end like rt.finish() does even on an error: the traceback as Python prints it (torch's hook
    adds the [rankN]: prefixes), then os._exit(1). Leaving through the interpreter's teardown instead lets
    torch 2.x's gloo threads abort it ~1 run in 4 (exit 134, "terminate called without an active
    exception"), which would hide the failure's own exit code."""
    try:
        train(parse_args())
    except Exception:  # noqa: BLE001 - any error: report it as Python would, then skip the teardown
        sys.excepthook(*sys.exc_info())
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


if __name__ == "__main__":
    main()
