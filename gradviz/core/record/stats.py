"""Statistics of watched gradients, reduced on the tensors' device into one small tensor.

Everything here stays on the device: the caller stacks the results of a recorded step and
copies them to the host once (one synchronisation), instead of one ``.item()`` per number.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from gradviz.core.diagnostics import classify_tensor
from gradviz.core.record import layout as L

#: Largest side of a recorded per-entry health image (bigger matrices are downsampled).
MAX_IMAGE_SIDE = 512


def histogram_bins(values: torch.Tensor) -> torch.Tensor:
    """Bin index (int32, flat) of each entry of ``values`` in the layout's fixed bins.

    With k = floor(log10|g|) - LOWEST_DECADE + 1 (1 .. DECADES for finite non-zero values,
    DECADES + 1 for an infinity, 0 for zero, whose log10 is -Inf), the bin is
    ZERO_BIN + k with the sign of g: zero lands on ZERO_BIN, NaN on NAN_BIN, the
    infinities one past the outermost finite bins (NEG_INF_BIN, POS_INF_BIN). A handful of
    in-place passes, no boolean selection (slow on the CPU).
    """
    flat = values.detach().reshape(-1)
    if flat.dtype != torch.float64:
        flat = flat.to(torch.float32)
        decade = torch.log10(flat.abs())  # float32 tops out at 3.4e38: only Inf reaches 39
    else:
        decade = torch.log10(flat.abs().clamp_max_(10.0 ** (L.HIGHEST_DECADE - 1)))
        decade += torch.isinf(flat)  # float64 can exceed 1e39 and stay finite
    # Subnormal float32 reaches 1e-45 (k = 1): only an exact zero falls below, to k = 0.
    decade.floor_().clamp_(L.LOWEST_DECADE - 1, L.HIGHEST_DECADE)
    decade -= L.LOWEST_DECADE - 1
    decade.copysign_(flat)
    decade += L.ZERO_BIN
    return decade.nan_to_num_(float(L.NAN_BIN)).to(torch.int32)


def gradient_rows(
    grads: list[torch.Tensor | None],
    params: list[torch.Tensor | None],
    device: torch.device,
) -> torch.Tensor:
    """(T, ROW_WIDTH) float64 on ``device``: per tensor the STAT_COLUMNS and the histogram.

    ``grads[t]`` None (no gradient reached it) gives NaN statistics and an empty histogram;
    ``params[t]`` None (a bare tensor whose value is not tracked) gives a NaN parameter norm.
    The update column is left NaN here (the recorder fills it in from the next step). The
    first-bad-index column holds the flat index of the first non-finite entry, or 0 when
    there is none (the histogram's NaN and Inf counts say which).
    """
    rows = torch.full((len(grads), L.ROW_WIDTH), math.nan, dtype=torch.float64, device=device)
    rows[:, len(L.STAT_COLUMNS) :] = 0  # a missing gradient: an empty histogram
    for t, (g, p) in enumerate(zip(grads, params)):
        if p is not None:
            rows[t, 2] = vector_norm(p.detach().to(device))
        if g is None:
            continue
        g = g.detach().to(device).reshape(-1)
        if g.numel():
            clean = torch.nan_to_num(g, nan=0.0, posinf=0.0, neginf=0.0)
            rows[t, 0] = vector_norm(clean)
            rows[t, 1] = vector_norm(clean, math.inf)
            # NaN != 0 and Inf != 0: the entries nan_to_num changed are the bad ones.
            rows[t, 4] = clean.ne(g).view(torch.uint8).argmax()  # the first maximum
        else:
            rows[t, 0] = rows[t, 1] = rows[t, 4] = 0.0
        rows[t, len(L.STAT_COLUMNS) :] = _count(histogram_bins(g))
    return rows


def _count(bins: torch.Tensor) -> torch.Tensor:
    """(BINS,) counts of bin indices. bincount on the CPU (one pass); elsewhere index_add_,
    because CUDA's bincount reads the largest index back to the host (a sync)."""
    if bins.device.type == "cpu":
        return torch.bincount(bins, minlength=L.BINS)
    counts = torch.zeros(L.BINS, dtype=torch.int64, device=bins.device)
    return counts.index_add_(0, bins.long(), torch.ones_like(bins, dtype=torch.int64))


def vector_norm(values: torch.Tensor, order: float = 2.0) -> torch.Tensor:
    """The vector norm in the values' own dtype (no float64 copy of a whole tensor)."""
    return torch.linalg.vector_norm(values, ord=order).to(torch.float64)


def finiteness_sums(grads: list[torch.Tensor | None], device: torch.device) -> torch.Tensor:
    """(T,) float64: the sum of each gradient (0 for None): non-finite when the gradient has
    a NaN or Inf (or, rarely, when a finite sum overflows: the caller then checks in full)."""
    present = [g.detach() for g in grads if g is not None]
    if len(present) == len(grads) and len({(g.dtype, g.device) for g in present}) == 1:
        return torch.stack([g.sum() for g in present]).to(device=device, dtype=torch.float64)
    zero = torch.zeros((), dtype=torch.float64, device=device)
    return (
        torch.stack(
            [
                zero if g is None else g.detach().sum().to(device=device, dtype=torch.float64)
                for g in grads
            ]
        )
        if grads
        else torch.zeros(0, dtype=torch.float64, device=device)
    )


def health_image(grad: torch.Tensor) -> torch.Tensor:
    """(H, W) uint8 Health codes of a matrix's gradient, at most MAX_IMAGE_SIDE a side.

    Codes as the lab classifies them (``diagnostics.classify_tensor``); a vector counts as
    one row, higher dimensions are flattened to (first dimension, rest). Downsampling keeps
    each block's largest code, its most alarming category, so one NaN entry stays visible.
    """
    codes = classify_tensor(grad.detach())
    if codes.ndim == 0:
        codes = codes.reshape(1, 1)
    elif codes.ndim == 1:
        codes = codes.reshape(1, -1)
    elif codes.ndim > 2:
        codes = codes.reshape(codes.shape[0], -1)
    rows, cols = codes.shape
    ky, kx = math.ceil(rows / MAX_IMAGE_SIDE), math.ceil(cols / MAX_IMAGE_SIDE)
    if ky == 1 and kx == 1:
        return codes
    pooled = F.max_pool2d(
        codes[None, None].to(torch.float32), (ky, kx), ceil_mode=True
    )  # small integers are exact in float32
    return pooled[0, 0].to(torch.uint8)
