"""Distance-matrix methods: coordinates (N, D) -> DistanceResult, by name.

Each method reproduces one way people build d_ij = ||x_i - x_j|| in PyTorch, including the
broken ones, so their gradients can be compared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DistanceResult:
    """distances: (N, N); squared: (N, N) pre-sqrt squared distances (a node of the graph,
    so its gradient can be inspected) or None; blocked: (N, N) bool, where the method stops
    the gradient on purpose, or None."""

    distances: torch.Tensor
    squared: torch.Tensor | None
    blocked: torch.Tensor | None


def gram_squared(x: torch.Tensor) -> torch.Tensor:
    """Squared distances by the Gram formula, ||x_i||^2 + ||x_j||^2 - 2 x_i.x_j (N, N).

    Cheap, but cancellation makes it inexact for close pairs and can round below zero.
    """
    gram = x @ x.T
    diag = torch.diagonal(gram)
    return diag[:, None] + diag[None, :] - 2 * gram


def naive(x: torch.Tensor) -> DistanceResult:
    """sqrt over the whole Gram matrix: the classic NaN (d sqrt/d sq is infinite at 0)."""
    sq = gram_squared(x)
    return DistanceResult(torch.sqrt(sq), sq, None)


def masked(x: torch.Tensor) -> DistanceResult:
    """sqrt of the off-diagonal only, selected with a boolean mask; the diagonal stays 0."""
    sq = gram_squared(x)
    off = ~torch.eye(len(x), dtype=torch.bool, device=x.device)
    d = torch.zeros_like(sq)
    d[off] = torch.sqrt(sq[off])
    return DistanceResult(d, sq, ~off)


def clamp_eps(dtype: torch.dtype) -> float:
    return 1e-12 if dtype == torch.float64 else 1e-8


def clamp(x: torch.Tensor) -> DistanceResult:
    """sqrt(clamp_min(sq, eps)), diagonal set to 0: finite, but no gradient for close pairs."""
    sq = gram_squared(x)
    eps = clamp_eps(x.dtype)
    d = torch.sqrt(torch.clamp_min(sq, eps))
    d = d * (1 - torch.eye(len(x), dtype=x.dtype, device=x.device))
    return DistanceResult(d, sq, sq < eps)


def safe(x: torch.Tensor) -> DistanceResult:
    """Exact distances from pairwise differences; zero (sub)gradient where points coincide."""
    diff = x[:, None, :] - x[None, :, :]
    sq = (diff * diff).sum(-1)
    coincident = sq == 0
    d = torch.where(coincident, 0.0, torch.sqrt(torch.where(coincident, 1.0, sq)))
    return DistanceResult(d, None, coincident)


def cdist(x: torch.Tensor) -> DistanceResult:
    """torch.cdist as users call it (Gram formula for large N)."""
    return DistanceResult(torch.cdist(x, x), None, None)


METHODS: dict[str, Callable[[torch.Tensor], DistanceResult]] = {
    "naive": naive,
    "masked": masked,
    "clamp": clamp,
    "safe": safe,
    "cdist": cdist,
}


def pairwise_distances(x: torch.Tensor, method: str = "safe") -> DistanceResult:
    """The distance matrix of ``x`` (N, D) by the named method (see config.DISTANCE_METHODS)."""
    return METHODS[method](x)
