"""Synthetic Snapshots built with numpy alone, for view tests, benchmarks and demos.

They look like a distance fit in progress: the target is a 3-D helix (random points in
other dimensions), the prediction a noisy rotated copy, and the gradients follow the
error of each entry the way a stress loss would.
"""

from __future__ import annotations

import numpy as np

from gradviz.core.common.health import classify
from gradviz.core.lab.snapshot import Snapshot


def helix(n: int, dim: int = 3, seed: int = 0) -> np.ndarray:
    """``(n, dim)`` float64 target points: a helix for dim 3, Gaussian points otherwise."""
    if dim == 3:
        t = np.linspace(0.0, 4.0 * np.pi, n)
        return np.column_stack([np.cos(t), np.sin(t), t / (2.0 * np.pi)])
    return np.random.default_rng(seed).normal(size=(n, dim))


def random_rotation(dim: int, seed: int = 0) -> np.ndarray:
    """A ``(dim, dim)`` orthogonal matrix with determinant +1."""
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(dim, dim)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] *= -1.0
    return q


def pairwise_distances(points: np.ndarray) -> np.ndarray:
    """``(N, N)`` float64 Euclidean distances of ``(N, D)`` points (exact zeros on the diagonal)."""
    p = np.asarray(points, dtype=np.float64)
    sq = np.maximum(((p[:, None, :] - p[None, :, :]) ** 2).sum(axis=-1), 0.0)
    return np.sqrt(sq)


def synthetic_snapshot(
    n: int = 64,
    dim: int = 3,
    *,
    seed: int = 0,
    generation: int = 0,
    step: int = 20,
    nan_diagonal: bool = False,
    noise: float = 0.1,
    reference_loss: float | None = 1e-3,
    method: str = "naive",
) -> Snapshot:
    """A Snapshot of ``n`` points in ``dim`` dimensions after ``step`` steps.

    ``nan_diagonal`` reproduces the classic bug: the gradient of every diagonal entry is
    0/0 = NaN (sqrt at 0), and NaN spreads to every coordinate gradient. Otherwise the
    diagonal gradients are exactly zero.
    """
    rng = np.random.default_rng(seed)
    target = helix(n, dim, seed)
    coords = target @ random_rotation(dim, seed + 1) + noise * rng.normal(size=(n, dim))
    coords += rng.normal(size=dim)  # an arbitrary offset: the fit ignores translation
    d_target = pairwise_distances(target)
    d_pred = pairwise_distances(coords)
    error = d_pred - d_target
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = error / d_pred  # dStress/dSquared up to a constant; 0/0 on the diagonal
    entry_grads = ratio / (n * n)
    diag = np.arange(n)
    entry_grads[diag, diag] = np.nan if nan_diagonal else 0.0
    summed = entry_grads.sum(axis=1)
    coord_grads = 4.0 * (summed[:, None] * coords - entry_grads @ coords)
    history = reference_loss_curve(step, seed)
    return Snapshot(
        generation=generation,
        step=step,
        loss=float(history[-1]) if step else float("nan"),
        loss_history=history,
        reference_loss=reference_loss,
        coords=coords.astype(np.float32),
        target_coords=target.astype(np.float32),
        distances=d_pred.astype(np.float32),
        target_distances=d_target.astype(np.float32),
        error=error.astype(np.float32),
        squared=(d_pred**2).astype(np.float32),
        entry_grads=entry_grads.astype(np.float32),
        entry_health=classify(entry_grads),
        coord_grads=coord_grads.astype(np.float32),
        coord_health=classify(coord_grads),
        param_health=(),
        jacobians=None,
        first_nonfinite_grad_step=step if nan_diagonal else None,
        first_nonfinite_loss_step=None,
        steps_per_second=100.0,
        device="cpu",
        method=method,
        done=False,
    )


def reference_loss_curve(steps: int, seed: int = 0) -> np.ndarray:
    """``(steps,)`` float64 losses decaying towards 1e-3 with a little noise."""
    rng = np.random.default_rng(seed)
    k = np.arange(steps, dtype=np.float64)
    return 1e-3 + np.exp(-k / 40.0) * (1.0 + 0.05 * rng.random(steps))
