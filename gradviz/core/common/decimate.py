"""Display-sized copies of big matrices (numpy only): block reductions that keep what matters.

Downsampling works on blocks of ``ky x kx`` entries. Categorical codes keep the block's
maximum (the most alarming Health code, see ``health.Health``); float values keep the block
mean, and a block that holds a NaN or an Inf stays non-finite, so a single NaN entry is
never averaged away. The same rules serve the run (``core.display`` reduces matrices on
their device before a Snapshot copies them to the host) and the views (which reduce a
snapshot's matrix further to the pixels on screen).
"""

from __future__ import annotations

import math

import numpy as np

#: The largest side of a matrix a Snapshot carries for display: a 2048 x 2048 float32
#: matrix is 16 MiB, about the pixels of a large screen.
MAX_DISPLAY = 2048


def display_factor(entries: float, pixels: float) -> int:
    """Block size along one axis so that ``entries`` fit into ``pixels`` screen pixels.

    ``ceil(entries / pixels)``, at least 1: the image has no more pixels than the screen
    area it fills (painting more would only be scaled away again), and at most about one
    screen pixel per image pixel is lost to rounding.
    """
    if pixels <= 0 or not math.isfinite(entries) or not math.isfinite(pixels):
        return 1
    return max(1, math.ceil(entries / pixels))


def block_rows(cell: int, block: int, size: int) -> range:
    """Full-resolution indices behind display cell ``cell`` along an axis of ``size``
    entries reduced by ``block`` (e.g. cell 3 of block 10 covers entries 30..39)."""
    start = cell * block
    if not 0 <= start < size:
        raise IndexError(f"display cell {cell} is outside {math.ceil(size / block)} cells")
    return range(start, min(start + block, size))


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


def block_counts(size: int, k: int) -> np.ndarray:
    """Entries in each block of ``k`` along an axis of ``size``: (ceil(size / k),) float32;
    the last block holds fewer when ``size`` is not a multiple of ``k``."""
    blocks = math.ceil(size / k)
    count = np.full(blocks, k, dtype=np.float32)
    count[-1] = size - k * (blocks - 1)
    return count


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
    with np.errstate(invalid="ignore", over="ignore"):
        out /= block_counts(rows, ky)[:, None]
        out /= block_counts(cols, kx)[None, :]
    return np.ascontiguousarray(out)
