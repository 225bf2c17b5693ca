"""What one evaluated forward and backward of a distance-fit run leaves for its Snapshot:
device tensors kept until the next step starts, reduced to display size for the Snapshot,
read at full resolution on request."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gradviz.core.common.health import Health
from gradviz.core.lab import display
from gradviz.core.lab.snapshot import PARAM_SIDE, ParamValues


@dataclass
class Capture:
    """Device tensors of one evaluated forward/backward, kept for the next Snapshot and for
    full-resolution readouts of it until the next step starts. The matrices are the graph's
    own outputs and gradients (nothing moves them after the backward pass), not copies."""

    attempt: int  # index of the evaluation (the step index when taken during a step)
    step: int  # the step of the Snapshot made from it (completed steps)
    loss: float
    coords: torch.Tensor  # (N, D)
    distances: torch.Tensor  # (N, N)
    squared: torch.Tensor | None  # (N, N)
    entry_grads: torch.Tensor  # (N, N)
    entry_health: torch.Tensor  # (N, N) uint8
    coord_grads: torch.Tensor  # (N, D)
    coord_health: torch.Tensor  # (N, D) uint8
    param_health: tuple[tuple[str, int], ...]
    jacobians: torch.Tensor | None  # (N, D, F)
    param_norms: tuple[tuple[str, float], ...] = ()  # (name, gradient norm), as param_health
    param_values: tuple[ParamValues, ...] = ()  # the network's parameters and gradients

    def display_matrices(self, block: int, target: torch.Tensor) -> dict[str, object]:
        """The Snapshot fields of the (N, N) matrices, reduced by ``block`` on the device:
        ``distances``, ``error`` (less ``target``, (N, N)), ``squared``, ``entry_grads``,
        ``entry_health`` (host arrays) and ``entry_health_counts`` (full resolution)."""
        squared = self.squared
        return {
            "distances": display.reduce_mean(self.distances, block),
            "error": display.reduce_mean(self.distances, block, minus=target),
            "squared": None if squared is None else display.reduce_mean(squared, block),
            "entry_grads": display.reduce_mean(self.entry_grads, block),
            "entry_health": display.reduce_max(self.entry_health, block),
            "entry_health_counts": code_counts(self.entry_health),
        }

    def cell_values(self, i: int, j: int, target: torch.Tensor) -> dict[str, float]:
        """Entries (i, j) at full resolution, by Snapshot field name; ``error`` as the
        Snapshot computes it (float32 difference)."""
        picks = {
            "distances": self.distances,
            "target_distances": target,
            "squared": self.squared,
            "entry_grads": self.entry_grads,
            "entry_health": self.entry_health,
        }
        values = {name: m[i, j].item() for name, m in picks.items() if m is not None}
        values["error"] = float(
            np.float32(values["distances"]) - np.float32(values["target_distances"])
        )
        return values


def parameter_values(model: torch.nn.Module | None) -> tuple[ParamValues, ...]:
    """Host copies of the leading block of each parameter of ``model`` and of its gradient
    (ParamValues), in ``named_parameters`` order; () without a model (free coordinates).
    Taken after the backward pass and before the optimizer moves the parameters, so the
    values are those the gradients were computed at."""
    if model is None:
        return ()
    kept = []
    for name, param in model.named_parameters():
        block = tuple(slice(0, PARAM_SIDE) for _ in range(param.dim()))
        values = param.detach()[block]
        grads = torch.zeros_like(values) if param.grad is None else param.grad.detach()[block]
        kept.append(
            ParamValues(
                name,
                tuple(param.shape),
                values.to("cpu", copy=True).numpy(),
                grads.to("cpu", copy=True).numpy(),
            )
        )
    return tuple(kept)


def code_counts(codes: torch.Tensor) -> tuple[int, ...]:
    """Entries of each Health code (index = code) in a full-resolution code matrix."""
    # One comparison per code: bincount would first widen the whole matrix to int64.
    counts = torch.stack([torch.count_nonzero(codes == h) for h in Health])
    return tuple(int(c) for c in counts.tolist())
