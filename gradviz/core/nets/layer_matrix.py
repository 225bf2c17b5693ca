"""One Linear layer's weights and gradients as one matrix: ``[W | b]``, for its heatmap.

Row i is output unit i; columns 0..in-1 are the weight's input units and, where the layer
has a bias, the last column is the bias. The values come from a Snapshot's
``param_values`` (leading blocks of at most PARAM_SIDE rows and columns); the matrix says
what it leaves out. Imports neither torch nor Qt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gradviz.core.common.health import HEALTH_LABELS, Health, classify
from gradviz.core.nets.networks import Linear, NetworkSpec


@dataclass(frozen=True)
class LayerMatrix:
    """Linear layer ``layer`` (0 = the first): ``weights`` and ``grads`` (R, C) float64
    (exact copies of the run's float32 or float64), ``health`` (R, C) uint8 Health codes of
    ``grads``; C = the weight's kept columns, plus 1 for the bias where ``has_bias``.
    ``out_features`` x ``in_features`` is the whole weight; R and the weight's C may be
    fewer (``elided``). ``dtype``: the run's (its ``tiny`` decides "subnormal")."""

    layer: int
    in_features: int
    out_features: int
    has_bias: bool
    weights: np.ndarray
    grads: np.ndarray
    health: np.ndarray
    dtype: str

    @property
    def weight_columns(self) -> int:
        return self.weights.shape[1] - (1 if self.has_bias else 0)

    @property
    def elided(self) -> bool:
        rows = self.weights.shape[0]
        return rows < self.out_features or self.weight_columns < self.in_features

    def is_bias(self, j: int) -> bool:
        return self.has_bias and j == self.weights.shape[1] - 1

    def elision_words(self) -> str:
        """What the matrix leaves out, in one sentence ("" where it holds the whole layer)."""
        if not self.elided:
            return ""
        rows, cols = self.weights.shape[0], self.weight_columns
        return (
            f"Showing the first {rows:,} of {self.out_features:,} output units and the first "
            f"{cols:,} of {self.in_features:,} inputs (the rest are not kept in the picture); "
            "the diagram's colour and norm are those of the whole tensor."
        )

    def entry_words(self, i: int, j: int) -> str:
        """Entry (i, j) for the hover readout: its place, weight (or bias), gradient and
        health, the gradient's subnormal range named (a health code of its own it has not)."""
        grad = float(self.grads[i, j])
        code = Health(int(self.health[i, j]))
        kind = "bias" if self.is_bias(j) else "weight"
        place = f"row {i} (output unit), " + (
            "bias column" if self.is_bias(j) else f"column {j} (input unit)"
        )
        health = HEALTH_LABELS[code]
        if code == Health.FINITE and abs(grad) < np.finfo(np.dtype(self.dtype)).tiny:
            health += ", subnormal"
        return (
            f"{place}: {kind} = {_number(float(self.weights[i, j]))}, "
            f"gradient = {_number(grad)} ({health})"
        )


def _number(value: float) -> str:
    if np.isnan(value):
        return "NaN"
    if np.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.6g}"


def layer_matrix(spec: NetworkSpec, param_values: Sequence, layer: int) -> LayerMatrix | None:
    """Linear layer ``layer`` of ``spec`` from a Snapshot's ``param_values``, or None where
    they are not this network's parameters (another network, free coordinates, a recording)
    or the layer is not there."""
    kept = {p.name: p for p in param_values}
    shapes = spec.state_shapes()
    if not kept or {name: tuple(p.shape) for name, p in kept.items()} != shapes:
        return None
    if list(kept) != list(shapes):
        return None
    linears = [(index, lay) for index, lay in enumerate(spec.layers) if isinstance(lay, Linear)]
    if not 0 <= layer < len(linears):
        return None
    index, linear = linears[layer]
    weight = kept[f"{index}.weight"]
    weights, grads = weight.values.astype(np.float64), weight.grads.astype(np.float64)
    if linear.bias:
        bias = kept[f"{index}.bias"]
        rows = weights.shape[0]
        weights = np.column_stack([weights, bias.values[:rows].astype(np.float64)])
        grads = np.column_stack([grads, bias.grads[:rows].astype(np.float64)])
    return LayerMatrix(
        layer=layer,
        in_features=linear.in_features,
        out_features=linear.out_features,
        has_bias=bool(linear.bias),
        weights=weights,
        grads=grads,
        health=classify(grads),
        dtype=str(weight.grads.dtype),
    )
