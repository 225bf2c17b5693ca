"""Array preparation for heatmaps (numpy only): downsampling and colour levels.

Downsampling works on blocks of ``ky x kx`` entries. Categorical codes keep the block's
maximum (the most alarming Health code); float values keep the block mean, and a block that
holds a NaN or an Inf stays non-finite, so a single NaN entry is never averaged away.
"""

from __future__ import annotations

import math

import numpy as np


def display_factor(entries: float, pixels: float) -> int:
    """Block size along one axis so that ``entries`` fit into ``pixels`` screen pixels.

    ``ceil(entries / pixels)``, at least 1: the image has no more pixels than the screen
    area it fills (painting more would only be scaled away again), and at most about one
    screen pixel per image pixel is lost to rounding.
    """
    if pixels <= 0 or not math.isfinite(entries) or not math.isfinite(pixels):
        return 1
    return max(1, math.ceil(entries / pixels))


def _reduce_rows(a: np.ndarray, k: int, op: np.ufunc) -> np.ndarray:
    """Combine every ``k`` consecutive rows with ``op``: (R, C) -> (ceil(R / k), C)."""
    out = a[0::k].copy()
    for r in range(1, k):
        part = a[r::k]
        rows = part.shape[0]
        op(out[:rows], part, out=out[:rows])
    return out


def _reduce_cols(a: np.ndarray, k: int, op: np.ufunc) -> np.ndarray:
    """Combine every ``k`` consecutive columns with ``op``: (R, C) -> (R, ceil(C / k))."""
    out = np.ascontiguousarray(a[:, 0::k])
    for r in range(1, k):
        part = a[:, r::k]
        cols = part.shape[1]
        op(out[:, :cols], part, out=out[:, :cols])
    return out


def block_max(codes: np.ndarray, ky: int, kx: int) -> np.ndarray:
    """Maximum of each ``ky x kx`` block: (R, C) -> (ceil(R / ky), ceil(C / kx)), same dtype.

    With Health codes this keeps the most alarming category of every block. Returns a new
    C-contiguous array (a copy even when ``ky == kx == 1``).
    """
    out = _reduce_rows(np.asarray(codes), ky, np.maximum) if ky > 1 else np.array(codes)
    if kx > 1:
        out = _reduce_cols(out, kx, np.maximum)
    return np.ascontiguousarray(out)


def block_mean(values: np.ndarray, ky: int, kx: int) -> np.ndarray:
    """Mean of each ``ky x kx`` block as float32: (R, C) -> (ceil(R / ky), ceil(C / kx)).

    A block holding a NaN is NaN; one holding only +Inf (or -Inf) besides finite values is
    +Inf (-Inf); +Inf with -Inf gives NaN. Returns a new C-contiguous float32 array.
    """
    a = np.asarray(values, dtype=np.float32)
    if ky == 1 and kx == 1:
        return np.array(a, dtype=np.float32, order="C")
    rows, cols = a.shape
    out = _reduce_rows(a, ky, np.add) if ky > 1 else np.array(a)
    if kx > 1:
        out = _reduce_cols(out, kx, np.add)
    # Edge blocks hold fewer entries when the size is not a multiple of the block.
    row_count = np.full(out.shape[0], ky, dtype=np.float32)
    row_count[-1] = rows - ky * (out.shape[0] - 1)
    col_count = np.full(out.shape[1], kx, dtype=np.float32)
    col_count[-1] = cols - kx * (out.shape[1] - 1)
    with np.errstate(invalid="ignore", over="ignore"):
        out /= row_count[:, None]
        out /= col_count[None, :]
    return np.ascontiguousarray(out)


def finite_range(values: np.ndarray) -> tuple[float, float] | None:
    """(min, max) of the finite entries, or None when there are none."""
    a = np.asarray(values)
    if a.size == 0:
        return None
    lo, hi = float(np.min(a)), float(np.max(a))
    if math.isfinite(lo) and math.isfinite(hi):
        return lo, hi
    finite = a[np.isfinite(a)]
    if finite.size == 0:
        return None
    return float(finite.min()), float(finite.max())


def _round_step(span: float, parts: int) -> float:
    """A power of ten close to ``span / parts`` (the granularity of rounded levels)."""
    return 10.0 ** math.floor(math.log10(span / parts))


def sequential_levels(values: np.ndarray) -> tuple[float, float]:
    """Colour levels (low, high) around the finite entries; never equal, never infinite.

    Rounded outwards to about a tenth of the span, so that levels (and the colorbar) stay
    put from frame to frame while values drift a little.
    """
    rng = finite_range(values)
    if rng is None:
        return 0.0, 1.0
    lo, hi = rng
    if hi <= lo:
        pad = max(abs(lo) * 1e-3, 1e-12)
        return lo - pad, hi + pad
    step = _round_step(hi - lo, 10)
    return math.floor(lo / step) * step, math.ceil(hi / step) * step


_LADDER = (1.0, 1.5, 2.0, 3.0, 5.0, 7.0, 10.0)


def ladder_ceil(value: float) -> float:
    """Smallest number of the form ``r * 10**k``, r in 1, 1.5, 2, 3, 5, 7, that is >= value."""
    exponent = math.floor(math.log10(value))
    scale = 10.0**exponent
    for rung in _LADDER:
        if rung * scale >= value * (1 - 1e-6):  # float32 data: 0.3 is 0.30000001
            return rung * scale
    return 10.0 * scale


def symmetric_levels(values: np.ndarray) -> tuple[float, float]:
    """Levels (-m, m), m just above the largest finite magnitude, so 0 sits mid-colormap.

    ``m`` is rounded up on a 1-1.5-2-3-5-7 ladder: it changes only when the magnitude
    crosses a rung, so colours (and the colorbar) stay put while a fit converges.
    """
    rng = finite_range(values)
    if rng is None:
        return -1.0, 1.0
    m = max(abs(rng[0]), abs(rng[1]))
    if m == 0.0:
        return -1.0, 1.0
    m = ladder_ceil(m)
    return -m, m


def nonfinite_codes(values: np.ndarray) -> np.ndarray:
    """uint8 overlay codes for a float image: 0 finite, 1 -Inf, 2 +Inf, 3 NaN."""
    a = np.asarray(values)
    codes = np.zeros(a.shape, dtype=np.uint8)
    codes[a == -np.inf] = 1
    codes[a == np.inf] = 2
    codes[np.isnan(a)] = 3
    return codes
