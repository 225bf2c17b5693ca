"""Histograms of parameter gradients, one per parameter tensor, with non-finite values counted.

The desktop app's Jacobian explorer shows, for a loss the user picks, how the gradient of
each layer's weight and bias is distributed. Finite values go into ordinary bins; NaN,
+Inf, -Inf and exact zeros get their own counts, because they are what the user is looking
for (TensorBoard's histogram summary errors on non-finite values and wandb drops them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.config import HISTOGRAM_LOSSES

#: Loss name -> what it is, for the loss selector (the table lives in the torch-free config).
LOSSES: dict[str, str] = HISTOGRAM_LOSSES


@dataclass(frozen=True)
class LayerHistogram:
    """The gradient dLoss/dparameter of one parameter tensor, binned.

    ``edges`` (bins + 1,) float64 and ``counts`` (bins,) int64 cover the finite non-zero
    values, as ``numpy.histogram`` bins them; exact zeros, NaN, +Inf and -Inf are counted
    apart, so ``counts.sum() + zero + nan + pos_inf + neg_inf == size``. A parameter the
    loss does not depend on has ``has_gradient`` False and all counts 0.
    """

    name: str  # parameter name, e.g. "2.weight"
    layer: str  # the module that owns it, e.g. "2" ("" for a parameter of the root module)
    shape: tuple[int, ...]
    edges: np.ndarray
    counts: np.ndarray
    zero: int
    nan: int
    pos_inf: int
    neg_inf: int
    has_gradient: bool = True

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nonfinite(self) -> int:
        return self.nan + self.pos_inf + self.neg_inf


def parameter_gradient_histograms(
    model: torch.nn.Module,
    inputs,
    loss: str = "sum",
    target=None,
    bins: int = 30,
) -> list[LayerHistogram]:
    """One LayerHistogram per parameter of ``model``, in ``named_parameters`` order.

    inputs: (B, n) array or tensor, converted to the model's dtype and device. ``loss`` is a
    key of LOSSES; ``target`` (B, m), the network's output shape, is required by ``mse`` and
    refused by the others. The parameters' ``.grad`` are left untouched.
    """
    _check_bins(bins)
    elsewhere = getattr(model, "run_elsewhere", None)
    if elsewhere is not None:  # a trusted program: its parameters are in its own process
        return elsewhere("histograms", torch.as_tensor(inputs), loss, target, bins)
    gradients = parameter_gradients(model, inputs, loss, target)
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters()}
    return [gradient_histogram(name, g, bins, shapes[name]) for name, g in gradients.items()]


def parameter_gradients(
    model: torch.nn.Module, inputs, loss: str = "sum", target=None
) -> dict[str, torch.Tensor | None]:
    """Parameter name -> dLoss/dparameter (None where the loss does not depend on it)."""
    if loss not in LOSSES:
        raise GradvizError(f"Unknown loss {loss!r}; choose one of: {', '.join(LOSSES)}.")
    if target is not None and loss != "mse":
        raise GradvizError(f"A target applies only to the loss 'mse', not to {loss!r}.")
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    if not named:
        return {}
    reference = named[0][1]
    x = _as_tensor(inputs, reference, "inputs")
    if x.ndim != 2:
        raise GradvizError(
            f"The inputs must be a (B, n) table, one row per input; got shape {tuple(x.shape)}."
        )
    with torch.enable_grad():
        try:
            outputs = model(x)
        except RuntimeError as exc:
            raise GradvizError(
                f"The network cannot take inputs of shape {tuple(x.shape)} "
                f"({str(exc).splitlines()[0]}); give one row of its input width per input."
            ) from None
        value = _loss(outputs, loss, target, reference)
        grads = torch.autograd.grad(value, [p for _, p in named], allow_unused=True)
    return {name: grad for (name, _), grad in zip(named, grads)}


def gradient_histogram(
    name: str,
    values: torch.Tensor | np.ndarray | None,
    bins: int = 30,
    shape: tuple[int, ...] | None = None,
) -> LayerHistogram:
    """Bin ``values`` (any shape) into a LayerHistogram named ``name``.

    ``values`` None means the parameter got no gradient; ``shape`` then gives its shape.
    """
    _check_bins(bins)
    layer = name.rpartition(".")[0]
    if values is None:
        return LayerHistogram(
            name=name,
            layer=layer,
            shape=tuple(shape or ()),
            edges=np.histogram_bin_edges([], bins),
            counts=np.zeros(bins, dtype=np.int64),
            zero=0,
            nan=0,
            pos_inf=0,
            neg_inf=0,
            has_gradient=False,
        )
    if isinstance(values, torch.Tensor):
        values = values.detach().to(device="cpu", dtype=torch.float64).numpy()
    flat = np.asarray(values, dtype=np.float64).ravel()
    finite = flat[np.isfinite(flat)]
    counts, edges = np.histogram(finite[finite != 0], bins=bins)
    return LayerHistogram(
        name=name,
        layer=layer,
        shape=tuple(np.shape(values)),
        edges=edges,
        counts=counts.astype(np.int64),
        zero=int(np.count_nonzero(finite == 0)),
        nan=int(np.count_nonzero(np.isnan(flat))),
        pos_inf=int(np.count_nonzero(flat == np.inf)),
        neg_inf=int(np.count_nonzero(flat == -np.inf)),
    )


def _loss(outputs: torch.Tensor, loss: str, target, reference: torch.Tensor) -> torch.Tensor:
    if loss == "sum":
        return outputs.sum()
    if loss == "sumsq":
        return (outputs * outputs).sum()
    if target is None:
        raise GradvizError("The loss 'mse' needs a target: load a file with one row per input.")
    t = _as_tensor(target, reference, "target")
    if t.shape != outputs.shape:
        raise GradvizError(
            f"The target has shape {tuple(t.shape)} but the network's outputs have shape "
            f"{tuple(outputs.shape)}; give one target row of {outputs.shape[-1]} values per input."
        )
    return F.mse_loss(outputs, t)


def _as_tensor(data, reference: torch.Tensor, what: str) -> torch.Tensor:
    """``data`` as a tensor with ``reference``'s dtype and device."""
    if isinstance(data, torch.Tensor):
        return data.detach().to(dtype=reference.dtype, device=reference.device)
    try:
        array = np.asarray(data, dtype=np.float64)
    except (TypeError, ValueError):
        raise GradvizError(f"The {what} must be numbers in a (rows, columns) table.") from None
    return torch.as_tensor(array, dtype=reference.dtype, device=reference.device)


def _check_bins(bins: int) -> None:
    if not (isinstance(bins, (int, np.integer)) and bins >= 1):
        raise GradvizError(f"The number of histogram bins must be a whole number >= 1, got {bins}.")
