"""Classical multidimensional scaling: the best reachable fit of a Euclidean distance matrix.

Classical (Torgerson) MDS double-centres the squared distances, B = -1/2 J D^2 J with
J = I - 11^T/N, and keeps the top-D eigenpairs: X = V_D sqrt(L_D). For distances that come
from points in D or fewer dimensions this recovers the points up to a rigid motion, so the
distances of X reproduce the target exactly and the reachable loss is zero up to rounding.

Everything here is float64 numpy, computed once per run.
"""

from __future__ import annotations

import numpy as np

#: Rows per block when a full (N, N) float64 matrix would be too large to hold at once.
_BLOCK_ROWS = 512


def classical_mds(squared_distances: np.ndarray, dim: int) -> np.ndarray:
    """Embed an (N, N) squared-distance matrix in ``dim`` dimensions: (N, dim) float64.

    Uses the eigendecomposition of the double-centred matrix (O(N^3): fine for a few
    thousand points). Negative eigenvalues (non-Euclidean input) contribute nothing.
    """
    sq = np.asarray(squared_distances, dtype=np.float64)
    n = sq.shape[0]
    b = _double_centred(sq)
    values, vectors = np.linalg.eigh((b + b.T) / 2)  # ascending order
    top = np.argsort(values)[::-1][:dim]
    scale = np.sqrt(np.clip(values[top], 0.0, None))
    coords = np.zeros((n, dim))
    coords[:, : len(top)] = vectors[:, top] * scale
    return coords


#: Subspace iterations of ``classical_mds_of_distances`` (each a (N, N) x (N, dim) product).
MDS_ITERATIONS = 60


def classical_mds_of_distances(distances: np.ndarray, dim: int) -> np.ndarray:
    """(N, N) distances -> (N, dim) float32 points whose distances approximate them (NaN
    and infinite distances count as zero): ``classical_mds`` for a picture on screen.

    The top ``dim`` eigenvectors of B are found by subspace iteration from a fixed start
    (a few ms at N = 500, where a full eigendecomposition takes a quarter of a second: a
    recording's timeline redraws within 100 ms).
    """
    d = np.nan_to_num(np.asarray(distances, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    n = d.shape[0]
    if n == 0:
        return np.zeros((0, dim), np.float32)
    gram = _double_centred(d**2)
    k = min(dim, n)
    basis = np.linalg.qr(np.random.default_rng(0).standard_normal((n, k)))[0]
    for _ in range(MDS_ITERATIONS):
        basis = np.linalg.qr(_times(gram, basis))[0]
    values, vectors = np.linalg.eigh(basis.T @ _times(gram, basis))  # Rayleigh-Ritz
    order = np.argsort(values)[::-1]
    coords = np.zeros((n, dim))
    coords[:, :k] = (basis @ vectors[:, order]) * np.sqrt(np.clip(values[order], 0, None))
    return coords.astype(np.float32)


def _double_centred(squared: np.ndarray) -> np.ndarray:
    """B = -1/2 J D^2 J (a new array)."""
    b = -0.5 * squared
    b -= b.mean(axis=0, keepdims=True)
    b -= b.mean(axis=1, keepdims=True)
    return b


def _times(matrix: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """``matrix @ columns`` one column at a time: a multi-threaded BLAS product of a tall
    thin matrix can take 50 times longer on a busy machine than these single products."""
    return np.stack([matrix @ columns[:, i] for i in range(columns.shape[1])], axis=1)


def classical_mds_from_points(points: np.ndarray, dim: int) -> np.ndarray:
    """Classical MDS of the Euclidean distances of ``points`` (N, D_t): (N, dim) float64.

    The double-centred squared distances of points equal the Gram matrix of the centred
    points, Xc Xc^T, whose top eigenpairs are the top singular pairs of Xc. So the same
    embedding comes from an (N, D_t) SVD in O(N D_t^2), usable for any N.
    """
    x = np.asarray(points, dtype=np.float64)
    centred = x - x.mean(axis=0, keepdims=True)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    k = min(dim, len(s))
    coords = np.zeros((x.shape[0], dim))
    coords[:, :k] = u[:, :k] * s[:k]
    return coords


def reference_loss(points: np.ndarray, dim: int) -> float:
    """The distance MSE of the classical-MDS embedding of ``points`` (N, D_t) in ``dim``
    dimensions: the best reachable loss of a fit to their Euclidean distances.

    When D_t <= dim the embedding is the centred points up to a rotation, so its distances
    equal the target's and the loss is exactly zero: returned without the O(N^2) check.
    """
    points = np.asarray(points, dtype=np.float64)
    if points.shape[1] <= dim:
        return 0.0
    return distance_mse(classical_mds_from_points(points, dim), points)


def distance_mse(points_a: np.ndarray, points_b: np.ndarray) -> float:
    """Mean over all N^2 entries of (d_a - d_b)^2, with d the exact distance matrices.

    Computed in row blocks of float64 exact differences, so memory stays O(block x N).
    """
    a = np.asarray(points_a, dtype=np.float64)
    b = np.asarray(points_b, dtype=np.float64)
    n = a.shape[0]
    total = 0.0
    for start in range(0, n, _BLOCK_ROWS):
        stop = min(start + _BLOCK_ROWS, n)
        da = exact_distances(a[start:stop], a)
        db = exact_distances(b[start:stop], b)
        total += float(np.sum((da - db) ** 2))
    return total / (n * n)


def exact_distances(rows: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Distances from each of ``rows`` (R, D) to each of ``points`` (N, D): (R, N) float64,
    from coordinate differences (no Gram-formula cancellation)."""
    sq = np.zeros((rows.shape[0], points.shape[0]))
    for axis in range(rows.shape[1]):  # one axis at a time keeps memory at R x N
        diff = rows[:, axis, None] - points[None, :, axis]
        sq += diff * diff
    return np.sqrt(sq)
