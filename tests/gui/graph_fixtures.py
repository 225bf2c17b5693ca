"""A watch recording of a residual MLP whose second block's first layer goes NaN in its
forward at one step (its weight poisoned before that step, as a bad update would).

Import with ``from graph_fixtures import ...`` (pytest puts this folder on sys.path).
"""

from __future__ import annotations

from pathlib import Path


def write_residual_recording(path: Path, steps: int = 5, nan_at: int = 3) -> Path:
    """A watch recording of a residual MLP (inp, b1, b2, out; each block fc1 -> Tanh -> fc2
    plus its input) whose ``b2.fc1`` weight is poisoned with a NaN before step ``nan_at``.

    Written in this process (a second or less; a fresh writer process pays the torch import,
    5-8 s); the global RNG is left as it was, so no other test sees the seed."""
    import torch

    import gradviz

    with torch.random.fork_rng():
        torch.manual_seed(0)
        model, x, y = _residual_mlp(), torch.randn(16, 4), torch.randn(16, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        with gradviz.watch(model, path, every=1) as rec:
            for step in range(steps):
                if step == nan_at:
                    with torch.no_grad():
                        model.b2.fc1.weight[0, 0] = float("nan")
                loss = ((model(x) - y) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                rec.log(loss=loss)
                opt.step()
    return path


def _residual_mlp():
    """The model, its classes named Block and ResidualMLP as the tests read them."""
    from torch import nn

    class Block(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.fc1, self.act = nn.Linear(width, width), nn.Tanh()
            self.fc2 = nn.Linear(width, width)

        def forward(self, x):
            return x + self.fc2(self.act(self.fc1(x)))

    class ResidualMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp, self.b1, self.b2 = nn.Linear(4, 8), Block(8), Block(8)
            self.out = nn.Linear(8, 1)

        def forward(self, x):
            return self.out(self.b2(self.b1(self.inp(x))))

    return ResidualMLP()


def resnet18_state_dict_names() -> list[str]:
    """The 122 state_dict names of torchvision's ResNet-18, in its order (178 nodes as a
    names tree; written out so the tests need no torchvision)."""
    bn = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")
    names = ["conv1.weight", *(f"bn1.{k}" for k in bn)]
    for layer in range(1, 5):
        for block in range(2):
            at = f"layer{layer}.{block}"
            names += [f"{at}.conv1.weight", *(f"{at}.bn1.{k}" for k in bn)]
            names += [f"{at}.conv2.weight", *(f"{at}.bn2.{k}" for k in bn)]
            if layer > 1 and block == 0:
                names += [f"{at}.downsample.0.weight", *(f"{at}.downsample.1.{k}" for k in bn)]
    return [*names, "fc.weight", "fc.bias"]
