"""Distance-matrix methods: coordinates (N, D) -> DistanceResult, by name.

Each method reproduces one way people build ``d_ij = ||x_i - x_j||`` in PyTorch, including
the broken ones, so that their gradients can be compared:

- ``naive``: the Gram formula and ``sqrt`` over the whole matrix (NaN from the zero diagonal);
- ``masked``: the Gram formula, ``sqrt`` of the off-diagonal entries only (the classic fix);
- ``clamp``: the Gram formula, ``sqrt(clamp_min(sq, eps))``;
- ``detach``: the Gram formula and ``sqrt``, the diagonal of d detached afterwards (still NaN:
  the literal ``stop_gradient`` attempt, placed after the operation that fails);
- ``safe``: exact distances from pairwise differences with a closed-form backward (recommended);
- ``cdist``: ``torch.cdist`` as people call it.

All methods are device-agnostic and work in float32 and float64. ``safe`` also takes batched
coordinates (..., N, D) -> (..., N, N).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.distance_methods import DISTANCE_METHOD_TABLE


@dataclass(frozen=True)
class DistanceResult:
    """distances: (N, N); squared: (N, N) pre-sqrt squared distances (a node of the graph,
    so its gradient can be inspected) or None; ``blocked``: (N, N) bool, where the method
    stops the gradient on purpose, or None.

    A method whose mask is part of its forward passes it (``mask``); one that stops the
    gradient exactly where points coincide says so (``blocked_where_coincident``) and the
    mask is made only when asked for: a capture reads it, a plain step does not.
    """

    distances: torch.Tensor
    squared: torch.Tensor | None
    mask: torch.Tensor | None
    blocked_where_coincident: bool = False

    @property
    def blocked(self) -> torch.Tensor | None:
        if self.blocked_where_coincident:
            return self.distances.detach() == 0
        return self.mask


def gram_squared(x: torch.Tensor) -> torch.Tensor:
    """Squared distances by the Gram formula, ||x_i||^2 + ||x_j||^2 - 2 x_i.x_j: (N, D) -> (N, N).

    Cheap, but cancellation makes it inexact for close pairs, and it can round below zero.
    """
    gram = x @ x.T
    diag = torch.diagonal(gram)
    return diag[:, None] + diag[None, :] - 2 * gram


def naive(x: torch.Tensor) -> DistanceResult:
    """sqrt over the whole Gram matrix: the classic NaN (d sqrt/d sq is infinite at 0)."""
    sq = gram_squared(x)
    return DistanceResult(torch.sqrt(sq), sq, None)


def masked(x: torch.Tensor) -> DistanceResult:
    """sqrt of the off-diagonal only, selected with a boolean mask; the diagonal stays 0.

    Still NaN wherever the Gram formula rounds an off-diagonal squared distance below zero.
    """
    sq = gram_squared(x)
    off = ~torch.eye(len(x), dtype=torch.bool, device=x.device)
    d = torch.zeros_like(sq)
    d[off] = torch.sqrt(sq[off])
    return DistanceResult(d, sq, ~off)


def clamp_eps(dtype: torch.dtype) -> float:
    """The floor that ``clamp`` puts under squared distances, in squared coordinate units."""
    return 1e-12 if dtype == torch.float64 else 1e-8


def clamp(x: torch.Tensor) -> DistanceResult:
    """sqrt(clamp_min(sq, eps)), diagonal set to 0: finite, but no gradient for close pairs."""
    sq = gram_squared(x)
    eps = clamp_eps(x.dtype)
    off_diagonal = 1 - torch.eye(len(x), dtype=x.dtype, device=x.device)
    d = torch.sqrt(torch.clamp_min(sq, eps)) * off_diagonal
    return DistanceResult(d, sq, sq < eps)


def detach(x: torch.Tensor) -> DistanceResult:
    """sqrt over the whole Gram matrix, then the diagonal of d detached: still NaN.

    Detaching after ``sqrt`` stops the gradient of the diagonal at d, where it is already 0;
    sqrt's backward then multiplies that 0 by its infinite derivative at 0: 0 x Inf = NaN.
    The gradient must be stopped before ``sqrt`` (on the squared distances), as ``masked``
    and ``gradviz.stop_gradient`` on ``sq`` do.
    """
    sq = gram_squared(x)
    eye = torch.eye(len(x), dtype=torch.bool, device=x.device)
    d = torch.sqrt(sq)
    return DistanceResult(torch.where(eye, d.detach(), d), sq, eye)


class ExactDistances(torch.autograd.Function):
    """Exact pairwise distances (..., N, D) -> (..., N, N), with a closed-form backward.

    Forward: ``torch.cdist`` in the mode that sums squared coordinate differences, so close
    pairs keep full relative precision (no Gram-formula cancellation). Leading batch
    dimensions are independent point sets; the backward runs once per set.

    Backward: with ``W = dL/dd / d`` (0 where points coincide, the minimum-norm subgradient
    of ``|t|`` at 0), ``dL/dx_i = sum_j (W_ij + W_ji) (x_i - x_j)``, i.e.
    ``x * rowsum(S) - S @ x`` with ``S = W + W^T``: matrix products with (N, D+1), no
    (N, N, D) tensor.
    """

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return torch.cdist(x, x, compute_mode="donot_use_mm_for_euclid_dist")

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        (x,) = inputs
        ctx.save_for_backward(x, output)

    @staticmethod
    def backward(ctx, grad_d: torch.Tensor):
        x, d = ctx.saved_tensors
        if x.numel() == 0:
            return torch.zeros_like(x)
        if torch.is_grad_enabled():
            # A double backward differentiates this too: keep 1/d off the coincident
            # entries, where 0 * inf would give NaN.
            coincident = d == 0
            w = (grad_d / d.masked_fill(coincident, 1)).masked_fill(coincident, 0)
        else:
            w = grad_d / d
            w.diagonal(dim1=-2, dim2=-1).zero_()
            # Off the diagonal, a coincident pair makes W non-finite (x / 0), and so does a
            # non-finite dL/dd (which must reach x): only then look for the pairs (a sum is
            # a cheaper pass than building the (N, N) mask every time).
            if not bool(torch.isfinite(w.sum())):
                w.masked_fill_(d == 0, 0)
        if x.ndim == 2:
            return _pair_gradient(x, grad_d, w, d)
        n, dim = x.shape[-2:]
        flat = zip(
            x.reshape(-1, n, dim),
            grad_d.reshape(-1, n, n),
            w.reshape(-1, n, n),
            d.reshape(-1, n, n),
        )
        return torch.stack([_pair_gradient(*one) for one in flat]).reshape(x.shape)


#: Float32 products are exact enough while R * max|W| <= this * max|dL/dd| (R: the spread of
#: the centred coordinates): then no pair is closer than R / 1000 with a gradient that matters,
#: and cancellation costs at most ~1e3 float32 roundings (~1e-4 relative).
_FLOAT32_CANCELLATION_LIMIT = 1e3

#: Entries of W converted to float64 at a time: 512 KB blocks stay in cache.
_BLOCK_ENTRIES = 1 << 16

#: float64 (no wider type to accumulate in): pairs closer than this fraction of the spread
#: of the centred coordinates take the direct form W_ij (x_i - x_j), exact to an ulp; the
#: products then cancel at most ~1 / this many roundings' worth for the other pairs.
_FLOAT64_CLOSE_FRACTION = 1 / 8
#: Rows of W a float64 block holds at most this many entries of (a bounded pair list).
_FLOAT64_BLOCK_ENTRIES = 1 << 20


def _pair_gradient(
    x: torch.Tensor, grad_d: torch.Tensor, w: torch.Tensor, d: torch.Tensor
) -> torch.Tensor:
    """dL/dx from dL/dd: (N, D), (N, N), (N, N), (N, N) -> (N, D) in the dtype of x.

    ``w`` is ``W = grad_d / d``, 0 where points coincide. The gradient
    ``sum_j (W_ij + W_ji) (x_i - x_j)`` is computed as ``x * rowsum(S) - S @ x`` with
    ``S = W + W^T``. That form cancels terms of size |S_ij| |x_j| against each other; for
    a pair 1e-4 apart at coordinate scale 100 it loses all float32 precision. In that case
    (and only then: it costs ~2x) the products of a float32 input accumulate in float64, a
    row block of W at a time. float64 has no wider type: its close pairs (``d``: the
    distances) take the direct form instead (``_float64_gradient``). x is centred first:
    translation does not change distances, and it shrinks |x_j|.
    """
    centred = x - x.mean(dim=0)
    if x.dtype == torch.float64:
        return _float64_gradient(x, centred, w, d)
    if not _float32_cancels(w, grad_d, centred):
        return _gradient_products(centred, w, rows=len(x))
    x64 = x.to(torch.float64)
    rows = max(1, _BLOCK_ENTRIES // len(x))
    return _gradient_products(x64 - x64.mean(dim=0), w, rows).to(x.dtype)


def _float32_cancels(w: torch.Tensor, grad_d: torch.Tensor, centred: torch.Tensor) -> bool:
    """Whether float32 products would lose precision to cancellation (see the limit above)."""
    w_min, w_max = torch.aminmax(w)
    g_min, g_max = torch.aminmax(grad_d)
    spread = centred.abs().max()
    w_abs = torch.maximum(-w_min, w_max)
    g_abs = torch.maximum(-g_min, g_max)
    # A NaN anywhere compares False and takes the careful path.
    return not bool(spread * w_abs <= _FLOAT32_CANCELLATION_LIMIT * g_abs)


def _gradient_products(centred: torch.Tensor, w: torch.Tensor, rows: int) -> torch.Tensor:
    """``centred * rowsum(S) - S @ centred`` with ``S = W + W^T``, in the dtype of ``centred``.

    centred: (N, D); w: (N, N), converted ``rows`` rows at a time. Two matrix products of
    ``[centred, 1]^T`` (D+1, N) with each block (the wide orientation BLAS runs fastest);
    W^T is never formed.
    """
    n = len(centred)
    ones = torch.ones(n, 1, dtype=centred.dtype, device=centred.device)
    xa = torch.cat([centred, ones], dim=1).T.contiguous()  # (D+1, N); ones give row sums
    p = torch.zeros_like(xa)  # (D+1, N): [(S @ centred)^T, rowsum(S)]
    for start in range(0, n, rows):
        r = slice(start, start + rows)
        block = w[r].to(centred.dtype)  # (b, N); no copy when the dtypes agree
        p += xa[:, r] @ block  # (W^T @ [x, 1])^T
        p[:, r] += xa @ block.T  # (W @ [x, 1])^T, columns r
    return centred * p[-1, :, None] - p[:-1].T


def _float64_gradient(
    x: torch.Tensor, centred: torch.Tensor, w: torch.Tensor, d: torch.Tensor
) -> torch.Tensor:
    """``sum_j (W_ij + W_ji) (x_i - x_j)`` in float64, exact to a few ulps for any pair.

    x, centred, w, d: (N, D), (N, D), (N, N), (N, N). A pair closer than
    _FLOAT64_CLOSE_FRACTION of the spread R = max|centred| contributes W_ij (x_i - x_j) to
    x_i and its negative to x_j, from the difference of x itself (exact for close values;
    the centred copy rounds); the products ``x * rowsum(S) - S @ x`` take the other pairs,
    whose terms |S_ij| |x_j| <= |S_ij| d_ij / fraction cancel to at most that many ulps.
    Row blocks bound the pair list whatever the points (all of them close: N^2 pairs).
    """
    n, grad = len(centred), torch.is_grad_enabled()
    limit = centred.abs().max() * _FLOAT64_CLOSE_FRACTION
    ones = torch.ones(n, 1, dtype=centred.dtype, device=centred.device)
    xa = torch.cat([centred, ones], dim=1).T.contiguous()  # (D+1, N); ones give row sums
    p = torch.zeros_like(xa)  # (D+1, N): [(S @ centred)^T, rowsum(S)] of the far pairs
    direct = torch.zeros_like(centred)  # (N, D): the close pairs' sums
    rows = max(1, _FLOAT64_BLOCK_ENTRIES // n)
    for start in range(0, n, rows):
        r = slice(start, start + rows)
        close = d[r] < limit  # (b, N), the diagonal included (its W is 0)
        flat = _true_positions(close)  # (pairs,) into the block read row by row
        i, j = flat // n, flat % n
        term = w[r].reshape(-1)[flat][:, None] * (x[i + start] - x[j])  # (pairs, D)
        if grad:
            block = w[r].masked_fill(close, 0)
        else:  # w is this backward's own: zero the few close pairs in place, not a pass
            block = w[r]
            block.view(-1)[flat] = 0
        p += xa[:, r] @ block
        p[:, r] += xa @ block.T
        direct = direct.index_add(0, i + start, term).index_add(0, j, -term)
    return centred * p[-1, :, None] - p[:-1].T + direct


def _true_positions(mask: torch.Tensor) -> torch.Tensor:
    """(K,) int64: where a contiguous bool ``mask`` is True, as positions in its entries
    read in order. On the CPU numpy's flatnonzero (a fifth of the time of torch's nonzero on
    an (N, N) mask); elsewhere torch's."""
    if mask.device.type == "cpu":
        return torch.from_numpy(np.flatnonzero(mask.numpy()))
    return mask.reshape(-1).nonzero().squeeze(1)


def safe(x: torch.Tensor) -> DistanceResult:
    """Exact distances, never NaN or Inf; zero distance and zero gradient where points coincide.

    ``squared`` is None (its health is read with respect to the distances); ``blocked`` is
    the coincident pairs, diagonal included.
    """
    return DistanceResult(ExactDistances.apply(x), None, None, blocked_where_coincident=True)


def cdist(x: torch.Tensor) -> DistanceResult:
    """torch.cdist as users call it (its default mode uses the Gram formula for large N)."""
    return DistanceResult(torch.cdist(x, x), None, None)


#: Each method of the one table of methods (settings.distance_methods), in its order, with
#: the function of its name above (a method without one fails here, at import).
METHODS: dict[str, Callable[[torch.Tensor], DistanceResult]] = {
    m.name: globals()[m.name] for m in DISTANCE_METHOD_TABLE
}


def pairwise_distances(x: torch.Tensor, method: str = "safe") -> DistanceResult:
    """The distance matrix of ``x`` (N, D) by the named method (see config.DISTANCE_METHODS)."""
    try:
        build = METHODS[method]
    except KeyError:
        raise GradvizError(
            f"Unknown distance method {method!r}; choose one of: {', '.join(METHODS)}."
        ) from None
    return build(x)
