"""A Lightning script, as people write it: a LightningModule and Trainer(strategy="ddp"), no cockpit import.

Lightning finds its cluster environment itself: under torchrun (cockpit's local and ssh launchers) it is
TorchElasticEnvironment, which needs devices * num_nodes == WORLD_SIZE; under srun (cockpit's sbatch form) it
is SLURMEnvironment, which needs devices == --ntasks-per-node (the job's procs_per_node) and num_nodes ==
--nodes, and which on SIGUSR1 saves a checkpoint and has rank 0 run `scontrol requeue` (slurm.requeue: true).
In both cases Lightning starts no processes of its own. Progress goes to stdout, one line per rank.

    cockpit run jobs/own/lightning_ddp.yaml -- --fail-rank 1      # rank 1 raises at step 5
"""

import argparse
import os

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(L.LightningModule):
    def __init__(self, fail_rank: int = -1, fail_step: int = 5) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
        self.fail_rank, self.fail_step = fail_rank, fail_step

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        step = self.global_step + 1
        if self.global_rank == self.fail_rank and step == self.fail_step:
            raise RuntimeError(f"lightning: rank {self.global_rank} failed on purpose at step {step}")
        if step % 4 == 0:
            print(f"lightning: rank {self.global_rank} epoch {self.current_epoch} step {step} "
                  f"loss {loss.item():.4f}", flush=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--accelerator", default="cpu", help="cpu | gpu | auto, as Lightning takes it")
    p.add_argument("--devices", type=int, default=2, help="processes per node (= the job's procs_per_node)")
    p.add_argument("--num-nodes", type=int, default=1)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--root", default=os.environ.get("COCKPIT_RUN_DIR", "."), help="checkpoints go here")
    p.add_argument("--fail-rank", type=int, default=-1, help="this rank raises at --fail-step")
    p.add_argument("--fail-step", type=int, default=5)
    args = p.parse_args()

    torch.manual_seed(0)
    x = torch.randn(512, 16)
    data = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=32)
    trainer = L.Trainer(accelerator=args.accelerator, devices=args.devices, num_nodes=args.num_nodes, strategy="ddp",
                        max_epochs=args.epochs, default_root_dir=args.root, logger=False,
                        enable_progress_bar=False, enable_model_summary=False)
    print(f"lightning: rank {trainer.global_rank} of {trainer.world_size}, "
          f"{type(trainer.strategy.cluster_environment).__name__}", flush=True)
    trainer.fit(Regressor(args.fail_rank, args.fail_step), data)
    print(f"lightning: rank {trainer.global_rank} done after {trainer.global_step} steps", flush=True)


if __name__ == "__main__":
    main()
