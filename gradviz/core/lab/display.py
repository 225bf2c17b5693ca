"""Display-sized copies of a run's (N, N) matrices, reduced on the run's device.

The rules are those of ``core.decimate`` (block mean for values, NaN and Inf kept; block
maximum for Health codes), applied to torch tensors in bands of rows so that no second
(N, N) array is made: a band of ``k * rows`` rows becomes ``rows`` display rows. Only the
display-sized result is copied to the host.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from gradviz.core.common.decimate import block_counts

#: Full-resolution entries reduced at a time (a band of rows): 4 MiB of float32 at most.
_BAND_ENTRIES = 1 << 20


def display_block(n: int, max_display: int | None) -> int:
    """Block size that brings an (n, n) matrix to at most ``max_display`` per side (1 for
    None: full resolution)."""
    if max_display is None or n <= max_display:
        return 1
    return math.ceil(n / max_display)


def _row_bands(rows: int, cols: int, k: int):
    """Row ranges (start, stop) of whole blocks of ``k`` rows, about _BAND_ENTRIES each."""
    band_rows = max(k, (_BAND_ENTRIES // max(cols, 1)) // k * k)
    for start in range(0, rows, band_rows):
        yield start, min(start + band_rows, rows)


def _blocks(band: torch.Tensor, k: int) -> torch.Tensor:
    """A band (r, C) zero-padded to whole blocks, as (ceil(r / k), k, ceil(C / k), k)."""
    pad_rows, pad_cols = -band.shape[0] % k, -band.shape[1] % k
    if pad_rows or pad_cols:
        band = torch.nn.functional.pad(band, (0, pad_cols, 0, pad_rows))
    return band.reshape(band.shape[0] // k, k, band.shape[1] // k, k)


def reduce_mean(matrix: torch.Tensor, k: int, minus: torch.Tensor | None = None) -> np.ndarray:
    """(R, C) tensor (less ``minus``, same shape, when given) -> (ceil(R / k), ceil(C / k))
    float32 host array of block means.

    A block holding a NaN is NaN, one holding +Inf (-Inf) besides finite values is +Inf
    (-Inf): sums keep them. Zero padding adds nothing, and edge blocks divide by the
    entries they really hold. The difference with ``minus`` is formed a band at a time.
    """
    matrix = matrix.detach()
    rows, cols = matrix.shape
    out = torch.empty((math.ceil(rows / k), math.ceil(cols / k)), dtype=torch.float32)
    for start, stop in _row_bands(rows, cols, k):
        band = matrix[start:stop].to(torch.float32)
        if minus is not None:
            band = band - minus[start:stop].detach().to(torch.float32)
        if k > 1:
            band = _blocks(band, k).sum(dim=(1, 3))
        out[start // k : start // k + band.shape[0]] = band.cpu()
    out = out.numpy()
    if k > 1:
        with np.errstate(invalid="ignore", over="ignore"):
            out /= block_counts(rows, k)[:, None]
            out /= block_counts(cols, k)[None, :]
    return out


def reduce_max(codes: torch.Tensor, k: int) -> np.ndarray:
    """(R, C) uint8 codes -> (ceil(R / k), ceil(C / k)) host array of block maxima (the
    most alarming Health code of each block; zero padding is the least alarming code)."""
    if k == 1:
        return codes.detach().to(device="cpu", copy=True).numpy()
    rows, cols = codes.shape
    parts = [
        _blocks(codes[start:stop], k).amax(dim=(1, 3)).cpu()
        for start, stop in _row_bands(rows, cols, k)
    ]
    return torch.cat(parts).numpy()
