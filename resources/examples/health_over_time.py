"""A small training loop whose gradients go bad in three ways, for the Model health page.

The second layer's ReLUs start dead for half its units (zero gradients below them), and
the learning rate grows every step (a warm-up that never stops), until the loss overflows
to Inf and then NaN. Open the
recording in the app:

    python resources/examples/health_over_time.py run-health
    gradviz gui run-health
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

import gradviz


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="new recording directory")
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--lr", type=float, default=1e-4, help="first learning rate")
    parser.add_argument("--growth", type=float, default=1.15, help="lr factor per step")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1)
    )
    with torch.no_grad():
        model[2].bias[:16] = -100.0  # dead units: zero gradients flow through them
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    schedule = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=args.growth)
    x = torch.randn(256, 8)
    y = (x**2).sum(dim=1, keepdim=True) * 10.0
    with gradviz.watch(model, args.path, every=1) as rec:
        for _ in range(args.steps):
            hidden = rec.tensor("hidden", model[1](model[0](x)))
            loss = ((model[4](model[3](model[2](hidden))) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            rec.log(loss=loss)
            opt.step()
            schedule.step()
    print(f"recorded {args.path}: gradviz gui {args.path}")


if __name__ == "__main__":
    main()
