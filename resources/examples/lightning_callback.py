"""A Lightning run recorded with one callback: gradients, loss, learning rate.

    pip install -e ".[lightning]"
    python resources/examples/lightning_callback.py run-lightning
    gradviz inspect run-lightning

Add ``--devices 2`` for a two-process DDP run on the CPU (each rank its own stream; the
callback checks each rank's own gradients before the all-reduce).
"""

from __future__ import annotations

import argparse

import lightning.pytorch as pl
import torch
from torch import nn

from gradviz.integrations.lightning import GradvizCallback


class Regressor(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=20, gamma=0.5)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def data(batch: int = 32) -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 8, generator=g)
    y = (x**2).sum(dim=1, keepdim=True)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch)


def train(path, steps: int = 60, devices: int = 1, every: int = 10) -> pl.Trainer:
    torch.manual_seed(0)
    trainer = pl.Trainer(
        max_steps=steps,
        accelerator="cpu",
        devices=devices,
        strategy="ddp" if devices > 1 else "auto",
        callbacks=[GradvizCallback(path, every=every)],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
    )
    trainer.fit(Regressor(), data())
    return trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="new recording directory")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--devices", type=int, default=1, help="CPU processes (DDP above 1)")
    args = parser.parse_args()
    train(args.path, args.steps, args.devices)
    print(f"recorded {args.path}: gradviz inspect {args.path}")


if __name__ == "__main__":
    main()
