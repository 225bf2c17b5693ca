"""Array preparation for heatmaps (numpy only): downsampling and colour levels.

The downsampling rules live in ``gradviz.core.common.decimate`` (the run reduces big matrices with
them before a Snapshot leaves it); they are re-exported here for the views.
"""

from __future__ import annotations

import math

import numpy as np

from gradviz.core.common.decimate import (  # noqa: F401 - re-exported for the views
    block_max,
    block_mean,
    display_factor,
)


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
