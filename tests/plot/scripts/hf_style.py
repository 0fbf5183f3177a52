"""A script that leaves what Hugging Face's Trainer leaves, without transformers: ``output_dir/checkpoint-N/
trainer_state.json`` at each save (its ``log_history``: one entry per ``logging_steps`` steps, with ``step`` and
``loss``), ``trainer_state.json`` in ``output_dir`` at the end, and the Trainer's printed log dicts (with no
step in them). One process. tests/plot/test_own_metrics.py runs it through `cockpit run`; the steps it logs
(2, 4, ... --steps) differ from the count of its printed dicts, so the test tells which source was read."""

import argparse
import json
import os

import torch
from torch import nn


def state(history: list, step: int, max_steps: int) -> str:
    return json.dumps({"global_step": step, "max_steps": max_steps, "logging_steps": 2, "log_history": history,
                       "epoch": step / max_steps, "is_world_process_zero": True}, indent=2)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--output-dir", default="out")
    args = p.parse_args()
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 8)
    y = x.sum(dim=1, keepdim=True)
    history: list = []
    for step in range(1, args.steps + 1):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 2 == 0:
            entry = {"epoch": round(step / args.steps, 2), "grad_norm": 1.0, "learning_rate": 4e-05,
                     "loss": round(loss.item(), 4), "step": step}
            history.append(entry)
            print({k: v for k, v in entry.items() if k != "step"}, flush=True)
        if step % 6 == 0:
            ckpt = os.path.join(args.output_dir, f"checkpoint-{step}")
            os.makedirs(ckpt, exist_ok=True)
            with open(os.path.join(ckpt, "trainer_state.json"), "w") as f:
                f.write(state(history, step, args.steps))
    history.append({"epoch": 1.0, "step": args.steps, "train_runtime": 1.0, "train_loss": 5.0})
    print({"train_runtime": 1.0, "train_loss": 5.0, "epoch": 1.0}, flush=True)
    with open(os.path.join(args.output_dir, "trainer_state.json"), "w") as f:
        f.write(state(history, args.steps, args.steps))


if __name__ == "__main__":
    main()
