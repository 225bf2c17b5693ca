"""The cheap and the exact look at one tensor: is it finite, and if not, where and how."""

from __future__ import annotations

import math

import torch

from gradviz.core.common.diagnostics import finiteness_sum


def looks_finite(t: torch.Tensor) -> bool:
    """True when the sum of ``t`` is finite: then every entry is (one pass, no allocation
    of its size). False is only a suspicion (see ``finiteness_sum``)."""
    return math.isfinite(finiteness_sum(t).item())


def nonfinite_mask(t: torch.Tensor) -> torch.Tensor | None:
    """``~isfinite(t)`` where some entry is non-finite, else None (a false suspicion)."""
    bad = ~torch.isfinite(t)
    return bad if bool(bad.any()) else None


def describe(t: torch.Tensor, bad: torch.Tensor, limit: int) -> tuple[str, int, list]:
    """(kind of the first non-finite entry, count, first ``limit`` flat indices)."""
    flat = bad.reshape(-1)
    count = int(flat.sum())
    first = torch.nonzero(flat)[:limit, 0].tolist()
    value = float(t.reshape(-1)[first[0]]) if first else math.nan
    kind = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return kind, count, first


def has_nan(t: torch.Tensor) -> bool:
    return bool(torch.isnan(t).any())


def kinds_of(t: torch.Tensor) -> str:
    """The kinds of non-finite entries ``t`` holds, as "nan", "inf", "-inf" joined by
    commas in that order ("" where every entry is finite)."""
    found = (
        ("nan", bool(torch.isnan(t).any())),
        ("inf", bool((t == math.inf).any())),
        ("-inf", bool((t == -math.inf).any())),
    )
    return ",".join(k for k, there in found if there)


def values_at(t: torch.Tensor, shape: torch.Size, flat: list[int]) -> tuple[float, ...] | None:
    """``t``'s values at flat indices of an output of ``shape`` (broadcasting ``t`` to it),
    or None where ``t`` does not broadcast to that shape."""
    try:
        wide = t.detach().expand(shape) if t.shape != shape else t.detach()
    except RuntimeError:
        return None
    coords = unravel(flat, shape)
    return tuple(float(wide[c]) for c in coords)


def unravel(flat: list[int], shape) -> list[tuple[int, ...]]:
    out = []
    for index in flat:
        coord = []
        for size in reversed(tuple(shape)):
            coord.append(index % size if size else 0)
            index = index // size if size else 0
        out.append(tuple(reversed(coord)))
    return out
