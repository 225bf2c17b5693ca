"""Checks on the tensors read from a file: dense floating point, finite or flagged."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio.info import LayerInfo


def check_dense(tensors: Mapping[str, Any], name: str) -> None:
    """GradvizError unless every tensor is dense (strided, not quantized)."""
    import torch

    for key, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            continue
        if tensor.layout != torch.strided:
            raise GradvizError(
                f"Tensor {key!r} in {name} is sparse ({tensor.layout}); gradviz reads dense "
                "tensors only."
            )
        if tensor.is_quantized or tensor.is_meta:
            kind = "quantized" if tensor.is_quantized else "a meta tensor without data"
            raise GradvizError(
                f"Tensor {key!r} in {name} is {kind}; gradviz reads dense "
                "floating-point tensors only."
            )


def nonfinite_names(tensors: Mapping[str, Any]) -> tuple[str, ...]:
    """Names of floating-point tensors holding NaN or Inf, in file order."""
    import torch

    floating = [
        (key, distinct_values(tensor))
        for key, tensor in tensors.items()
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point()
    ]
    # Judged in groups (one isfinite per group instead of one per tensor: 10,000 small
    # layers cost 0.4 s one by one); a group that holds NaN or Inf is looked at tensor by
    # tensor to name them.
    found: list[str] = []
    for group in _groups(floating):
        # float64 holds every float dtype's values, NaN and Inf (a group is small).
        if len(group) > 1 and _finite(torch.cat([v.reshape(-1).double() for _, v in group])):
            continue
        found += [key for key, values in group if not _finite(values)]
    return tuple(found)


def _finite(values: Any) -> bool:
    import torch

    return bool(torch.isfinite(values).all())


_GROUP_ELEMENTS = 1 << 20  # elements judged together: a copy of at most 8 MiB at a time


def _groups(named: list[tuple[str, Any]]) -> list[list[tuple[str, Any]]]:
    """Consecutive runs of (name, tensor) holding at most _GROUP_ELEMENTS elements each
    (a larger tensor is a group of its own)."""
    groups: list[list[tuple[str, Any]]] = []
    size = _GROUP_ELEMENTS
    for key, tensor in named:
        numel = tensor.numel()
        if size + numel > _GROUP_ELEMENTS:
            groups.append([])
            size = 0
        groups[-1].append((key, tensor))
        size += numel
    return groups


def distinct_values(tensor: Any) -> Any:
    """A view of ``tensor`` without its repetitions: dimensions of stride 0 (an expanded
    tensor repeats one slice) are cut to one element, so a (40000, 40000) view of one
    stored number is checked as one number, never materialised."""
    index = tuple(
        slice(0, 1) if stride == 0 and size > 1 else slice(None)
        for size, stride in zip(tensor.shape, tensor.stride())
    )
    return tensor[index] if index else tensor


def split_key(key: str) -> tuple[str, str]:
    """``fc1.weight`` -> (``fc1``, ``weight``); ``weight`` -> (``""``, ``weight``)."""
    prefix, _, leaf = key.rpartition(".")
    return prefix, leaf


def group_by_prefix(tensors: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Tensors grouped by everything before the last dot, groups in first-seen order."""
    groups: dict[str, dict[str, Any]] = {}
    for key, tensor in tensors.items():
        prefix, leaf = split_key(key)
        groups.setdefault(prefix, {})[leaf] = tensor
    return groups


def layers_from_tensors(tensors: Mapping[str, Any]) -> tuple[LayerInfo, ...]:
    """One LayerInfo per name prefix; ``linear`` where it holds a 2-D weight (+ 1-D bias)."""
    return layers_from_shapes({k: tuple(int(s) for s in t.shape) for k, t in tensors.items()})


def layers_from_shapes(shapes: Mapping[str, tuple[int, ...]]) -> tuple[LayerInfo, ...]:
    """As ``layers_from_tensors``, from tensor names and shapes alone."""
    layers = []
    for prefix, group in group_by_prefix(shapes).items():
        linear = set(group) <= {"weight", "bias"} and len(group.get("weight", ())) == 2
        layers.append(LayerInfo(prefix or "(top)", "linear" if linear else "tensors", group))
    return tuple(layers)


def natural_key(text: str) -> list:
    """Sort key that puts ``layers.2`` before ``layers.10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]
