"""The classic Jacobian net, trained on a toy regression, with per-input Jacobians recorded.

    python resources/examples/jacobian_probe.py RUN
    gradviz inspect RUN --json

``probe=`` gives gradviz a fixed batch of inputs; at each recorded step it stores the
per-input Jacobians J (B, m, n) of the model at those inputs (as the image
"probe_jacobians", one row of m x n values per input), so you can see how the network's
local linear maps change while it trains. The loop itself is unchanged but for the marked
lines.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

import gradviz


def train(path: str, steps: int = 300, every: int = 50) -> list[float]:
    """Fit a 2-20-20-4 tanh net to a smooth map R^2 -> R^4; return the losses."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 20), nn.Tanh(), nn.Linear(20, 20), nn.Tanh(), nn.Linear(20, 4))
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    x = torch.randn(256, 2)
    y = torch.stack([x[:, 0] * x[:, 1], x[:, 0].sin(), x[:, 1].cos(), x.sum(1)], dim=1)
    probe = torch.linspace(-2, 2, 16)[:, None].repeat(1, 2)  # 16 points on the diagonal
    losses = []
    with gradviz.watch(net, path, every=every, probe=probe) as rec:  # gradviz
        for _ in range(steps):
            optimizer.zero_grad()
            loss = ((net(x) - y) ** 2).mean()
            loss.backward()
            rec.log(loss=loss)  # gradviz
            optimizer.step()
            losses.append(loss.item())
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="the recording to write (a new directory)")
    args = parser.parse_args()
    losses = train(args.path)
    print(f"loss: first {losses[0]:.4g}, last {losses[-1]:.4g}")
