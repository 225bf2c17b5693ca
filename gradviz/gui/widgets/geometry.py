"""Point-set geometry for viewing (numpy only): rigid Procrustes alignment and PCA.

A distance fit is defined only up to rotation, reflection and translation, so predicted
points are aligned to the target before they are drawn next to it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RigidFit:
    """``aligned = (points - source_mean) @ rotation + target_mean``."""

    rotation: np.ndarray  # (D, D) orthogonal
    source_mean: np.ndarray  # (D,)
    target_mean: np.ndarray  # (D,)

    def apply(self, points: np.ndarray) -> np.ndarray:
        """Move ``(N, D)`` points with this fit; returns float64 ``(N, D)``."""
        p = np.asarray(points, dtype=np.float64)
        return (p - self.source_mean) @ self.rotation + self.target_mean


def rigid_procrustes(
    points: np.ndarray, target: np.ndarray, allow_reflection: bool = True
) -> RigidFit:
    """Rotation (and reflection, if allowed) plus translation taking ``points`` onto ``target``.

    Least squares over the rows where both ``(N, D)`` sets are finite; no scaling, so the
    drawn distances stay the fitted ones. With no finite row the fit is the identity.
    """
    p = np.asarray(points, dtype=np.float64)
    t = np.asarray(target, dtype=np.float64)
    dim = p.shape[1]
    rows = np.isfinite(p).all(axis=1) & np.isfinite(t).all(axis=1)
    if not rows.any():
        zero = np.zeros(dim)
        return RigidFit(np.eye(dim), zero, zero)
    p_mean = p[rows].mean(axis=0)
    t_mean = t[rows].mean(axis=0)
    cross = (p[rows] - p_mean).T @ (t[rows] - t_mean)  # (D, D)
    u, _, vt = np.linalg.svd(cross)
    if not allow_reflection and np.linalg.det(u @ vt) < 0:
        u[:, -1] *= -1.0
    return RigidFit(u @ vt, p_mean, t_mean)


@dataclass(frozen=True)
class Projection:
    """A linear map from D dimensions to the two drawn axes: ``(points - mean) @ axes``."""

    mean: np.ndarray  # (D,)
    axes: np.ndarray  # (D, 2)
    labels: tuple[str, str]

    def apply(self, points: np.ndarray) -> np.ndarray:
        """``(N, D)`` -> ``(N, 2)`` float64."""
        return (np.asarray(points, dtype=np.float64) - self.mean) @ self.axes


def axis_projection(dim: int, first: int, second: int) -> Projection:
    """Show coordinate ``first`` against coordinate ``second`` (no centring)."""
    axes = np.zeros((dim, 2))
    axes[first, 0] = 1.0
    axes[second, 1] = 1.0
    return Projection(np.zeros(dim), axes, (f"x{first}", f"x{second}"))


def pca_projection(points: np.ndarray) -> Projection:
    """The two principal axes of the finite rows of ``(N, D)`` points (D >= 2).

    Each axis is signed so that its largest component is positive, which keeps the picture
    from flipping when the points barely change.
    """
    p = np.asarray(points, dtype=np.float64)
    dim = p.shape[1]
    rows = np.isfinite(p).all(axis=1)
    if rows.sum() < 2:
        return axis_projection(dim, 0, 1)
    mean = p[rows].mean(axis=0)
    _, _, vt = np.linalg.svd(p[rows] - mean, full_matrices=False)
    axes = vt[:2].T.copy()  # (D, 2)
    for c in range(2):
        if axes[np.argmax(np.abs(axes[:, c])), c] < 0:
            axes[:, c] *= -1.0
    return Projection(mean, axes, ("PC 1", "PC 2"))
