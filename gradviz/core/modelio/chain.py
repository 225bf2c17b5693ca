"""Rebuild a chain of Linear layers and activations (a NetworkSpec) from named tensors.

A chain is what gradviz runs without trust: it knows exactly what such a network computes
once the weights, the layer order and the activations are known. Weights alone do not say
which activation sat between the layers; callers pass it and say so in the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio.tensors import group_by_prefix, natural_key
from gradviz.core.nets.networks import Activation, Linear, NetworkSpec, _module_for

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


@dataclass(frozen=True)
class LinearWeights:
    """One Linear layer as found in a file: ``weight`` (out, in), ``bias`` (out,) or None."""

    name: str
    weight: Any
    bias: Any = None


# An item of a chain: a Linear layer's weights or an activation name.
ChainItem = LinearWeights | str


class NotAChain(Exception):
    """The tensors are not a chain of Linear layers; the message is one sentence."""


def linear_items(tensors: Mapping[str, Any], *, natural_order: bool) -> list[LinearWeights]:
    """The Linear layers in ``tensors`` (``<prefix>.weight`` (out, in), optional
    ``<prefix>.bias`` (out,)), in file order or, with ``natural_order``, sorted by name.

    NotAChain if any group of tensors is something else; GradvizError if a layer is broken
    (a bias without a weight, a bias whose length does not match the weight)."""
    groups = group_by_prefix(tensors)
    if not groups:
        raise NotAChain("The file holds no tensors.")
    names = sorted(groups, key=natural_key) if natural_order else list(groups)
    for prefix in names:  # first: is this a chain at all?
        _check_linear_shaped(prefix, groups[prefix])
    return [_linear(prefix, groups[prefix]) for prefix in names]


def spec_from_items(items: list[ChainItem]) -> tuple[NetworkSpec, list[LinearWeights]]:
    """The NetworkSpec of a chain and its Linear weights in order.

    GradvizError naming the tensors where consecutive widths do not match."""
    layers: list[Linear | Activation] = []
    linears: list[LinearWeights] = []
    for item in items:
        if isinstance(item, str):
            if item != "identity":
                layers.append(Activation(item))
            continue
        out_width, in_width = (int(s) for s in item.weight.shape)
        if linears:
            prev = linears[-1]
            if int(prev.weight.shape[0]) != in_width:
                raise GradvizError(
                    f"Shapes do not chain: {_key(prev.name, 'weight')} "
                    f"{tuple(prev.weight.shape)} gives width {int(prev.weight.shape[0])} but "
                    f"{_key(item.name, 'weight')} {tuple(item.weight.shape)} expects width "
                    f"{in_width}."
                )
        layers.append(Linear(in_width, out_width, item.bias is not None))
        linears.append(item)
    return NetworkSpec(tuple(layers)), linears


def with_activation(linears: list[LinearWeights], activation: str) -> list[ChainItem]:
    """Linear layers with ``activation`` between consecutive ones (not after the last)."""
    items: list[ChainItem] = []
    for k, item in enumerate(linears):
        if k > 0:
            items.append(activation)
        items.append(item)
    return items


def activations_between(items: list[ChainItem]) -> bool:
    """True when every gap between consecutive Linear layers holds an activation (identity
    does not count): only then does the declaration order say where each one runs."""
    gap_filled = True
    seen_linear = False
    for item in items:
        if isinstance(item, str):
            gap_filled = gap_filled or item != "identity"
            continue
        if seen_linear and not gap_filled:
            return False
        seen_linear, gap_filled = True, False
    return True


def same_width_layers(linears: list[LinearWeights]) -> list[str]:
    """Names of the Linear layers mapping a width to itself: where a residual block's skip
    connection (x + f(x)) fits."""
    return [
        item.name or "(top)"
        for item in linears
        if int(item.weight.shape[0]) == int(item.weight.shape[1])
    ]


def build_chain(spec: NetworkSpec, linears: list[LinearWeights]):
    """The ``nn.Sequential`` that ``spec.build()`` makes, its Linear layers holding copies of
    the file's weights (the spec was made from their shapes).

    Float16/bfloat16 weights become float32 (autograd on CPU in half precision is not what
    a user inspecting gradients wants); float32 and float64 stay as they are."""
    import torch

    dtype = linears[0].weight.dtype
    if dtype not in (torch.float32, torch.float64):
        dtype = torch.float32
    # The Sequential spec.build() makes, its Linear layers made from the file's weights
    # directly: initialising 10,000 layers at random to overwrite them cost seconds, and
    # load_state_dict and Sequential indexing are quadratic in the number of layers.
    weights = iter(linears)
    modules = [
        _linear_module(next(weights), dtype) if isinstance(layer, Linear) else _module_for(layer)
        for layer in spec.layers
    ]
    module = torch.nn.Sequential()
    # Children by index as Sequential(*modules) names them, without add_module's attribute
    # checks per child (a fresh Sequential has no attribute named by a number).
    module._modules.update((str(k), child) for k, child in enumerate(modules))
    return module.eval()


def _linear_module(item: LinearWeights, dtype):
    """An ``nn.Linear`` holding copies of ``item``'s weight and bias in ``dtype``, made
    without the random initialisation its constructor would run."""
    import torch

    layer = torch.nn.Linear.__new__(torch.nn.Linear)
    torch.nn.Module.__init__(layer)
    # Straight into the module's dicts: Module.__setattr__ checks every dict of the module
    # for each name (a third of the cost of building 10,000 layers).
    layer.__dict__["out_features"], layer.__dict__["in_features"] = (
        int(s) for s in item.weight.shape
    )
    parameters = layer._parameters
    parameters["weight"] = torch.nn.Parameter(item.weight.detach().to(dtype, copy=True))
    parameters["bias"] = (
        None if item.bias is None else torch.nn.Parameter(item.bias.detach().to(dtype, copy=True))
    )
    return layer


def _check_linear_shaped(prefix: str, group: dict[str, Any]) -> None:
    weight = group.get("weight")
    extra = sorted(set(group) - {"weight", "bias"})
    if extra or (weight is not None and weight.dim() != 2):
        what = ", ".join(_key(prefix, leaf) for leaf in (extra or ["weight"]))
        raise NotAChain(
            f"gradviz rebuilds only chains of Linear layers and activations, and "
            f"{prefix or 'the top level'} ({what}) is not a Linear layer; such a model runs "
            "only as trusted TorchScript or .pt2."
        )


def _linear(prefix: str, group: dict[str, Any]) -> LinearWeights:
    weight, bias = group.get("weight"), group.get("bias")
    if weight is None:
        raise GradvizError(
            f"{_key(prefix, 'bias')} has no matching {_key(prefix, 'weight')}; "
            "the file is missing that weight."
        )
    for leaf, tensor in (("weight", weight), ("bias", bias)):
        if tensor is not None and str(tensor.dtype).removeprefix("torch.") not in FLOAT_DTYPES:
            raise GradvizError(
                f"{_key(prefix, leaf)} is {tensor.dtype}; gradviz needs floating-point weights."
            )
    if bias is not None and (bias.dim() != 1 or int(bias.shape[0]) != int(weight.shape[0])):
        raise GradvizError(
            f"{_key(prefix, 'bias')} has shape {tuple(bias.shape)} but "
            f"{_key(prefix, 'weight')} {tuple(weight.shape)} needs a bias of shape "
            f"({int(weight.shape[0])},)."
        )
    if 0 in weight.shape:
        raise GradvizError(f"{_key(prefix, 'weight')} has an empty shape {tuple(weight.shape)}.")
    return LinearWeights(prefix, weight, bias)


def _key(prefix: str, leaf: str) -> str:
    return f"{prefix}.{leaf}" if prefix else leaf
