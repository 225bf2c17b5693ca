"""Each Linear layer's weight and bias gradient, read from a Snapshot's parameter fields.

A run's network is ``NetworkSpec.build()``'s ``nn.Sequential``: the parameters of Linear layer
``k`` of the spec's layers are named ``"{k}.weight"`` and ``"{k}.bias"``. A Snapshot carries
(name, worst Health code) in ``param_health`` and (name, gradient norm) in ``param_norms``,
both from one forward/backward; this module pairs them with the spec's layers. Imports
neither torch nor Qt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gradviz.core.common.health import HEALTH_LABELS, Health
from gradviz.core.nets.networks import Linear, NetworkSpec


@dataclass(frozen=True)
class ParamGradient:
    """One parameter tensor's gradient: its L2 norm (None: not known) and worst entry."""

    name: str
    norm: float | None
    health: Health

    def describe(self) -> str:
        """``norm 3.2e-02, worst entry finite`` (the norm's NaN and Inf spelled out)."""
        return f"norm {format_norm(self.norm)}, worst entry {HEALTH_LABELS[self.health]}"


@dataclass(frozen=True)
class LayerGradient:
    """Linear layer ``layer`` (0 = the first) of the spec: its in and out widths and the
    gradients of its weight and bias (None where it has no bias)."""

    layer: int
    in_features: int
    out_features: int
    weight: ParamGradient
    bias: ParamGradient | None

    @property
    def worst(self) -> Health:
        codes = [self.weight.health] + ([self.bias.health] if self.bias else [])
        return max(codes)


def layer_gradients(
    spec: NetworkSpec,
    param_health: tuple[tuple[str, int], ...],
    param_norms: tuple[tuple[str, float], ...] = (),
) -> list[LayerGradient] | None:
    """Each Linear layer's gradients, in order, or None where the parameters named are not
    exactly those of ``spec``'s module (another network, free coordinates, a recording that
    holds no parameter gradients). Norms missing from ``param_norms`` are None."""
    names = [name for name, _ in param_health]
    if not names or names != list(spec.state_shapes()):
        return None
    health = {name: Health(int(code)) for name, code in param_health}
    norms = {name: float(value) for name, value in param_norms}

    def gradient(name: str) -> ParamGradient:
        return ParamGradient(name, norms.get(name), health[name])

    result, k = [], 0
    for index, layer in enumerate(spec.layers):
        if not isinstance(layer, Linear):
            continue
        bias = gradient(f"{index}.bias") if layer.bias else None
        result.append(
            LayerGradient(
                k, layer.in_features, layer.out_features, gradient(f"{index}.weight"), bias
            )
        )
        k += 1
    return result


def format_norm(norm: float | None) -> str:
    """A gradient norm as text: 3 significant digits, NaN and Inf spelled out."""
    if norm is None:
        return "not known"
    if math.isnan(norm):
        return "NaN"
    if math.isinf(norm):
        return "Inf"
    return f"{norm:.3g}"
