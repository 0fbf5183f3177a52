"""A Lightning script on CPU, 2 processes (Trainer(strategy="ddp") under torchrun), that logs its loss with
``self.log("train_loss", ...)`` to a CSVLogger (``lightning_logs/version_N/metrics.csv`` in its working
directory, as Lightning's default logger writes when tensorboard is not installed) and prints nothing of it.
``--logger default``: the Trainer's default logger instead, a TensorBoardLogger where tensorboard is installed
(event files in ``lightning_logs/version_N/``). tests/plot/test_own_metrics.py runs it through `cockpit run`."""

import argparse

import lightning as L
import torch
from lightning.pytorch.loggers import CSVLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--logger", choices=("csv", "default"), default="csv")
    args = p.parse_args()
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    data = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=8)
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_steps=args.steps, log_every_n_steps=2,
                        logger=CSVLogger(".") if args.logger == "csv" else True, enable_progress_bar=False,
                        enable_model_summary=False,
                        enable_checkpointing=False)
    trainer.fit(Regressor(), data)


if __name__ == "__main__":
    main()
