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
    """Bin index (int64, same numel, flat) of each entry in the layout's fixed bins."""
    flat = values.detach().reshape(-1)
    if flat.dtype != torch.float64:
        flat = flat.to(torch.float32)
    decade = torch.log10(flat.abs())
    decade = decade.floor_().clamp_(L.LOWEST_DECADE, L.HIGHEST_DECADE - 1)
    positive = L.FIRST_POSITIVE_BIN + (decade - L.LOWEST_DECADE)
    negative = L.FIRST_NEGATIVE_BIN + (L.HIGHEST_DECADE - 1 - decade)
    bins = torch.where(flat > 0, positive, negative).nan_to_num_(float(L.NAN_BIN))
    bins = bins.to(torch.int64)
    bins.masked_fill_(flat == 0, L.ZERO_BIN)
    bins.masked_fill_(flat == math.inf, L.POS_INF_BIN)
    bins.masked_fill_(flat == -math.inf, L.NEG_INF_BIN)
    bins.masked_fill_(torch.isnan(flat), L.NAN_BIN)
    return bins


def gradient_rows(
    grads: list[torch.Tensor | None],
    params: list[torch.Tensor | None],
    device: torch.device,
) -> torch.Tensor:
    """(T, ROW_WIDTH) float64 on ``device``: per tensor the STAT_COLUMNS and the histogram.

    ``grads[t]`` None (no gradient reached it) gives NaN statistics and an empty histogram;
    ``params[t]`` None (a bare tensor whose value is not tracked) gives a NaN parameter norm.
    The update column is left NaN here (the recorder fills it in from the next step).
    """
    rows = torch.full((len(grads), L.ROW_WIDTH), math.nan, dtype=torch.float64, device=device)
    bins = []
    for t, (g, p) in enumerate(zip(grads, params)):
        if p is not None:
            rows[t, 2] = torch.linalg.vector_norm(p.detach().to(device), dtype=torch.float64)
        if g is None:
            continue
        g = g.detach().to(device).reshape(-1)
        finite = torch.isfinite(g)
        clean = torch.where(finite, g, torch.zeros((), dtype=g.dtype, device=device))
        if g.numel():
            rows[t, 0] = torch.linalg.vector_norm(clean, dtype=torch.float64)
            rows[t, 1] = clean.abs().max().to(torch.float64)
            bad = ~finite
            first = bad.to(torch.uint8).argmax()  # the first maximum: the first bad entry
            rows[t, 4] = torch.where(bad.any(), first, -1).to(torch.float64)
        else:
            rows[t, 0] = rows[t, 1] = 0.0
            rows[t, 4] = -1.0
        bins.append(histogram_bins(g) + t * L.BINS)
    counts = torch.bincount(
        torch.cat(bins) if bins else torch.zeros(0, dtype=torch.int64, device=device),
        minlength=len(grads) * L.BINS,
    ).reshape(len(grads), L.BINS)
    rows[:, len(L.STAT_COLUMNS) :] = counts  # a missing gradient: an empty histogram
    return rows


def finiteness_sums(grads: list[torch.Tensor | None], device: torch.device) -> torch.Tensor:
    """(T,) float64: the sum of each gradient (0 for None): non-finite when the gradient has
    a NaN or Inf (or, rarely, when a finite sum overflows: the caller then checks in full)."""
    sums = [
        torch.zeros((), dtype=torch.float64, device=device)
        if g is None
        else g.detach().sum(dtype=torch.float64).to(device)
        for g in grads
    ]
    return torch.stack(sums) if sums else torch.zeros(0, dtype=torch.float64, device=device)


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
