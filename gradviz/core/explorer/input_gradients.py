"""Gradients of a model with respect to inputs of any shape (B, *in_shape).

Where the per-sample Jacobian is small enough (m x prod(in_shape) entries at most
``limits.MAX_JACOBIAN_ENTRIES``, one million), it is computed as for (B, n) inputs and shaped
(B, m, *in_shape). Otherwise (an image classifier's 1000 x 3 x 224 x 224) gradviz computes
what people look at: the gradient of one output per sample with respect to that sample's
input, (B, *in_shape): the saliency, with gradient x input and per-sample norms. Like the
Jacobian it is the diagonal block of the batch's derivative (d f(X)[b, k] / d X[b]): one
backward pass of the batch when a probe shows samples do not interact, else one per sample,
so it is exact either way.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch import nn

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio.limits import MAX_JACOBIAN_ENTRIES
from gradviz.core.nets.jacobians import compute_jacobians

JACOBIAN = "jacobian"
SALIENCY = "saliency"


@dataclass(frozen=True)
class InputGradients:
    """``kind`` "jacobian": ``values`` (B, m, *in_shape), J[b] = d f(X)[b] / d X[b].
    ``kind`` "saliency": ``values`` (B, *in_shape) = d f(X)[b, k_b] / d X[b] for the output
    ``explained`` (B,) k_b, ``grad_x_input`` (B, *in_shape) = values * X.
    ``outputs`` (B, m); ``norms`` (B,): the L2 norm of each sample's values."""

    kind: str
    values: torch.Tensor
    outputs: torch.Tensor
    norms: torch.Tensor
    method: str
    reason: str
    explained: torch.Tensor | None = None
    grad_x_input: torch.Tensor | None = None


class _Flattened(nn.Module):
    """``model`` on (B, n) inputs reshaped to (B, *in_shape), outputs flattened to (B, m)."""

    def __init__(self, model: nn.Module, in_shape: tuple[int, ...]) -> None:
        super().__init__()
        self.model = model
        self.in_shape = in_shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x.reshape(len(x), *self.in_shape)).reshape(len(x), -1)

    @property
    def run_elsewhere(self):
        """The inner model's ``run_elsewhere`` (a program in its own process, see
        nets.jacobians), told to reshape the inputs; None where it runs here."""
        inner = getattr(self.model, "run_elsewhere", None)
        return None if inner is None else functools.partial(inner, in_shape=self.in_shape)


def flattened(model: nn.Module, in_shape: tuple[int, ...]) -> nn.Module:
    """``model`` as a map of (B, n) inputs to (B, m) outputs (n = prod(in_shape))."""
    return _Flattened(model, tuple(in_shape))


def input_gradients(
    model: nn.Module,
    inputs: torch.Tensor,
    *,
    output: int | None = None,
    method: str = "auto",
    max_entries: int = MAX_JACOBIAN_ENTRIES,
) -> InputGradients:
    """Per-sample Jacobians or, above ``max_entries``, saliency (see the module docstring).

    ``output`` picks the explained output for saliency (default: each sample's largest);
    asking for it forces saliency. ``inputs`` (B, *in_shape) are in the model's dtype."""
    if inputs.ndim < 2 or len(inputs) == 0 or 0 in inputs.shape:
        raise GradvizError(
            f"Inputs must have shape (B, ...) with B >= 1 and no empty dimension, not "
            f"{tuple(inputs.shape)}."
        )
    in_shape = tuple(int(s) for s in inputs.shape[1:])
    n = math.prod(in_shape)
    with torch.no_grad():
        m = _outputs(model, inputs).shape[1]  # the whole batch: a .pt2 may fix its size
    if output is None and m * n <= max_entries:
        flat = model if len(in_shape) == 1 else _Flattened(model, in_shape)
        result = compute_jacobians(flat, inputs.reshape(len(inputs), n), method)
        values = result.jacobians.reshape(len(inputs), m, *in_shape)
        norms = result.jacobians.flatten(1).norm(dim=1)
        return InputGradients(JACOBIAN, values, result.outputs, norms, result.method, result.reason)
    return _saliency(model, inputs, output, m, n)


def _saliency(
    model: nn.Module, inputs: torch.Tensor, output: int | None, m: int, n: int
) -> InputGradients:
    if output is not None and not 0 <= output < m:
        raise GradvizError(f"--output {output} does not exist; the model has outputs 0..{m - 1}.")
    with torch.enable_grad():
        x = inputs.detach().clone().requires_grad_(True)
        y = _outputs(model, x)
        clean = torch.nan_to_num(y.detach(), nan=-math.inf)
        explained = (
            clean.argmax(dim=1)
            if output is None
            else torch.full((len(x),), output, device=y.device)
        )
        picked = y[torch.arange(len(x), device=y.device), explained]
        grads, mixes = _diagonal_gradients(picked, x)
    which = "output " + str(output) if output is not None else "each sample's largest output"
    how = (
        "one backward pass per sample, since the model mixes samples"
        if mixes
        else "one backward pass of the batch (a probe of the first and last samples showed "
        "no cross-sample derivatives)"
    )
    reason = (
        f"the per-sample Jacobian would have {m:,} x {n:,} entries, over "
        f"{MAX_JACOBIAN_ENTRIES:,}, so the gradient of {which} was computed by {how}"
        if output is None
        else f"the gradient of {which} was asked for; computed by {how}"
    )
    values = grads.detach()
    return InputGradients(
        SALIENCY,
        values,
        y.detach(),
        values.flatten(1).norm(dim=1),
        "saliency",
        reason,
        explained=explained,
        grad_x_input=values * inputs,
    )


def _diagonal_gradients(picked: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """d picked[b] / d x[b] for every sample b, (B, *in_shape), and whether samples mix.

    One backward pass of the batch sum gives them all when no sample's output depends on
    another sample's input; a probe of the first and last samples (two backward passes)
    checks that, else each sample gets its own backward pass (B in all). NaN counts as
    mixing."""
    batch = len(x)
    if batch > 1:
        mixes = False
        for b in (0, batch - 1):
            (grad,) = torch.autograd.grad(picked[b], x, retain_graph=True)
            others = torch.arange(batch, device=x.device) != b
            mixes = mixes or bool(grad[others].ne(0).any())
        if mixes:
            rows = []
            for b in range(batch):
                (grad,) = torch.autograd.grad(picked[b], x, retain_graph=b < batch - 1)
                rows.append(grad[b])
            return torch.stack(rows), True
    (grad,) = torch.autograd.grad(picked.sum(), x)
    return grad, False


def _outputs(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """model(x) as (B, m), or GradvizError saying what the model did with these inputs."""
    try:
        y = model(x)
    except GradvizError:
        raise
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        text = (lines[-1] if lines else type(exc).__name__).rstrip(".")[:200]
        raise GradvizError(
            f"The model could not run on inputs of shape {tuple(x.shape)} ({text}); check "
            "--input-shape or the inputs file."
        ) from None
    if not isinstance(y, torch.Tensor) or y.ndim == 0 or y.shape[0] != x.shape[0]:
        shape = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
        raise GradvizError(
            f"The model must map (B, ...) inputs to (B, ...) outputs; it returned {shape} for "
            f"inputs of shape {tuple(x.shape)}."
        )
    return y.reshape(len(x), -1)
