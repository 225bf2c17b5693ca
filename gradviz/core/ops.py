"""The library's operations for people's own models: exact distances, per-element
stop-gradient and per-input Jacobians (``gradviz.pairwise_distances`` and friends).

These are thin, documented faces of the lab's own code (``core.distances``,
``core.jacobians``), so a user's model gets exactly what the app shows.
"""

from __future__ import annotations

import torch
from torch import nn

from gradviz.core.common.errors import GradvizError
from gradviz.core.lab import distances as _distances
from gradviz.core.nets.jacobians import compute_jacobians


def pairwise_distances(x: torch.Tensor, method: str = "safe") -> torch.Tensor:
    """Distances ``d[..., i, j] = ||x[..., i, :] - x[..., j, :]||``: (..., N, D) -> (..., N, N).

    The default ``safe`` is exact (pairwise differences, not the Gram formula) and never
    gives a NaN or Inf gradient: where two points coincide (the diagonal included) their
    distance is 0 and its gradient is 0. Works on any device, in float32 and float64, and
    with leading batch dimensions (e.g. (B, N, 3) structures). ``method`` names one of the
    lab's constructions (``naive``, ``masked``, ``clamp``, ``safe``, ``cdist``, ``detach``)
    to reproduce their behaviour; those run once per point set of a batch.

    >>> x = torch.randn(8, 100, 3, requires_grad=True)
    >>> d = gradviz.pairwise_distances(x)          # (8, 100, 100)
    >>> ((d - target) ** 2).mean().backward()       # x.grad is finite
    """
    if not isinstance(x, torch.Tensor) or x.ndim < 2:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise GradvizError(
            f"pairwise_distances needs coordinates of shape (..., N, D), got {shape}."
        )
    if method not in _distances.METHODS:
        return _distances.pairwise_distances(x, method).distances  # raises, naming choices
    if method == "safe" or x.ndim == 2:
        if method == "safe":
            return _distances.ExactDistances.apply(x)
        return _distances.pairwise_distances(x, method).distances
    n, dim = x.shape[-2:]
    sets = [_distances.pairwise_distances(one, method).distances for one in x.reshape(-1, n, dim)]
    return torch.stack(sets).reshape(*x.shape[:-1], n)


def stop_gradient(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``x`` unchanged in value; no gradient flows back to ``x`` where ``mask`` is True.

    Per-element detach (``tf.stop_gradient`` on selected elements): dL/dx is 0 where
    ``mask`` (bool, broadcastable to ``x``) is True and unchanged elsewhere.

    Place it *before* the operation whose derivative is infinite. For distances, mask the
    diagonal of the squared distances before ``sqrt``::

        sq = (x[:, None] - x[None]).pow(2).sum(-1)                        # (N, N)
        sq = gradviz.stop_gradient(sq, torch.eye(len(x), dtype=torch.bool))
        d = torch.sqrt(sq)                                                # x.grad finite

    sqrt's backward is still Inf or NaN on the diagonal, but the mask drops it before it
    reaches ``x``. Detaching the diagonal of ``d`` *after* ``sqrt`` (the lab's method
    ``detach``) is too late: sqrt's backward multiplies the stopped 0 by Inf, and NaN reaches
    every coordinate.
    """
    mask = torch.as_tensor(mask, device=x.device)
    if mask.dtype != torch.bool:
        raise GradvizError(f"stop_gradient needs a bool mask, got {mask.dtype}.")
    return torch.where(mask, x.detach(), x)


def per_input_jacobians(model: nn.Module, x: torch.Tensor, method: str = "auto") -> torch.Tensor:
    """Per-input Jacobians J (B, m, *in_shape), ``J[b] = d model(x)[b] / d x[b]``, for ``x``
    of shape (B, *in_shape): (B, n) rows, images (B, C, H, W), sequences (B, T, F), ...

    The model's output per sample is flattened to its m entries (a transformer layer's
    (B, T, d) output has m = T * d). The engine behind ``gradviz jacobian``: ``auto`` takes
    one backward pass of the batch per output coordinate when samples do not interact (by
    construction, or on a probe of the batch), else the diagonal blocks of the batch Jacobian
    from batched vector-Jacobian products; exact either way. The model is left as it was
    found (mode, ``.grad``, buffers); ``x`` needs no ``requires_grad``. ``method`` is one of
    ``auto``, ``loop``, ``batchsum``, ``jacrev``, ``jacfwd`` (the last two are torch.func's
    vmap, which cannot run every layer: LSTMs and CPU attention need ``auto`` or ``loop``).

    >>> J = gradviz.per_input_jacobians(net, torch.randn(64, 2))          # (64, 4, 2)
    >>> J = gradviz.per_input_jacobians(cnn, torch.randn(8, 3, 32, 32))   # (8, 10, 3, 32, 32)
    """
    if not isinstance(x, torch.Tensor):
        raise GradvizError(
            f"Inputs must be a torch tensor of shape (B, *in_shape), not {type(x).__name__}."
        )
    if x.ndim < 2 or 0 in x.shape:
        raise GradvizError(
            "Inputs must have shape (B, *in_shape) with B >= 1 and no empty dimension "
            f"(a batch of samples, e.g. (B, n) or (B, C, H, W)), not {tuple(x.shape)}."
        )
    if x.ndim == 2:
        return compute_jacobians(model, x, method=method).jacobians
    from gradviz.core.explorer.input_gradients import flattened

    in_shape = tuple(int(s) for s in x.shape[1:])
    jac = compute_jacobians(flattened(model, in_shape), x.reshape(len(x), -1), method).jacobians
    return jac.reshape(len(x), jac.shape[1], *in_shape)
