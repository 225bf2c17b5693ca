"""The small network both trainer integrations train (import: ``from tiny_nets import ...``)."""

import torch


def tiny_net() -> torch.nn.Sequential:
    """4 -> 8 -> tanh -> 1, seeded: the same weights in every test."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
