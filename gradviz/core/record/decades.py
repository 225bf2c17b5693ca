"""Histogram bins of gradient entries read from their float bits, at the same cost for any values.

The layout's bin of a value g is its decade, floor(log10|g|), signed, with zero, the
infinities and NaN in bins of their own. float32 ``log10`` takes a slow path on exact zeros
and subnormals (10-80x on the CPU), which ReLU, dropout and late training make common; so
the decade is read from the bits instead. Positive floats sort like their bit patterns read
as integers, so a value's decade is the number of decade edges (bit patterns) at or below
its magnitude's bits; with a negative value's magnitude bits flipped (-1 - magnitude), all
floats sort like their bits and the bin is a count of edges at or below them. A bucket key
from the top bits of the magnitude (a bucket at most two octaves wide, so never more than
one edge inside: edges are 3.3 octaves apart) picks from two small tables the bin of the
bucket's lowest values and the bucket's edge; one comparison with that edge adds 0 or 1.
No transcendental function, no branch, the same integer passes for any values.

The edges are those of the log10 path that the bins came from before (``log10_decades``):
each is the smallest float whose log10, as torch computes it in that dtype, reaches the
decade, found once per dtype by running that path around each power of ten. So the bins
are bitwise the same as before, on every device (the tables are built on the CPU).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from gradviz.core.record import layout as L

#: Bits of a float dtype read as a signed integer of the same width.
_INT_VIEW = {torch.float32: torch.int32, torch.float64: torch.int64}
_NUMPY = {torch.float32: (np.float32, np.int32), torch.float64: (np.float64, np.int64)}
#: Ulps searched on each side of the float nearest a power of ten for the edge: log10 of
#: at most ~150 floats below 10^d rounds up to d (float64 at |d| >= 32), far fewer above.
_EDGE_WINDOW = 512
#: Key shift per dtype. float32: the magnitude's bits converted to float32 and shifted
#: right 17 keep the exponent and 6 mantissa bits of that integer: subnormals (small
#: integers, converted exactly) get fine buckets, the largest values buckets two octaves
#: wide. float64: no subnormal
#: reaches the lowest decade (1e-45), so a plain shift keeping 3 mantissa bits does.
_SHIFT = {torch.float32: 17, torch.float64: 49}


def log10_decades(values: torch.Tensor) -> torch.Tensor:
    """k (float, same shape) of each entry: floor(log10|g|) - LOWEST_DECADE + 1 for finite
    values in the layout's range (1 .. DECADES), 0 for zero (and for float64 magnitudes
    below 1e-45), DECADES + 1 for an infinity, NaN for NaN. The definition of the bins; too
    slow on zeros and subnormals to run on gradients, used to find the decade edges."""
    magnitude = values.abs()
    if values.dtype == torch.float64:
        # float64 can exceed 1e39 and stay finite: clamp, then lift only Inf one decade.
        decade = torch.log10(magnitude.clamp_max(10.0 ** (L.HIGHEST_DECADE - 1)))
        decade += torch.isinf(values)
    else:  # float32 tops out at 3.4e38: only Inf reaches decade 39.
        decade = torch.log10(magnitude)
    decade = decade.floor_().clamp_(L.LOWEST_DECADE - 1, L.HIGHEST_DECADE)
    return decade - (L.LOWEST_DECADE - 1)


@functools.cache
def decade_edges(dtype: torch.dtype) -> tuple[int, ...]:
    """The bit patterns (as non-negative ints) where k steps up: entry j - 1 is the smallest
    positive ``dtype`` value with k >= j, for j = 1 .. DECADES + 2 (the last two: +Inf, and
    the smallest NaN pattern, k = DECADES + 2 standing for NaN)."""
    float_type, int_type = _NUMPY[dtype]
    ks = np.arange(1, L.DECADES + 1)
    powers = (10.0 ** (L.LOWEST_DECADE + ks - 1)).astype(float_type)
    nearest = powers.view(int_type).astype(np.int64)
    # (DECADES, 2 * window) bit patterns around each power of ten, run through log10 at once.
    bits = nearest[:, None] + np.arange(-_EDGE_WINDOW, _EDGE_WINDOW)[None, :]
    bits = np.maximum(bits, 1)
    values = torch.from_numpy(bits.astype(int_type).view(float_type))
    reached = log10_decades(values).numpy() >= ks[:, None]
    edges = []
    for k, row, found in zip(ks, bits, reached):
        # The first entry after which every one has reached k (log10 is monotone here).
        below = np.flatnonzero(~found)
        first = 0 if below.size == 0 else int(below[-1]) + 1
        if first >= len(row) or (first == 0 and row[0] != 1):
            raise RuntimeError(f"no decade edge near 1e{L.LOWEST_DECADE + k - 1} for {dtype}")
        edges.append(int(row[first]))
    infinity = int(np.array([np.inf], dtype=float_type).view(int_type)[0])
    return (*edges, infinity, infinity + 1)


@dataclass(frozen=True)
class BinTable:
    """Per bucket key (``keys`` of the values' sortable bits, offset to start at 0): the
    bin of the bucket's lowest values, and the bucket's edge (the sortable bits where the
    bin steps up by one; the dtype's largest integer where it does not)."""

    shift: int
    offset: int
    low: torch.Tensor  # (buckets,) int32
    edge: torch.Tensor  # (buckets,) the float's signed integer view dtype


def bucket_keys(sorted_bits: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """Bucket key (int64 array, before the offset) of sortable bits, as ``bins_from_bits``
    forms it: the magnitude's bucket, bitwise negated for a negative value (float32: the
    bucket through a conversion of the magnitude bits to float32, rounding as torch does)."""
    negative = sorted_bits < 0
    magnitude = np.where(negative, ~sorted_bits, sorted_bits)
    if dtype == torch.float32:
        magnitude = magnitude.astype(np.int32).astype(np.float32).view(np.int32)
    bucket = magnitude.astype(np.int64) >> _SHIFT[dtype]
    return np.where(negative, ~bucket, bucket)


@functools.cache
def _cpu_table(dtype: torch.dtype) -> BinTable:
    positive = np.array(decade_edges(dtype)[:-1], dtype=np.int64)  # up to +Inf; NaN aside
    # The bin is NEG_INF_BIN plus the number of edges at or below a value's sortable bits:
    # -Inf, the negative decades from the largest, zero (from -0.0), the positive decades,
    # +Inf. NaN patterns land on NEG_INF_BIN or POS_INF_BIN, and the caller moves them.
    edges = np.concatenate([-positive[::-1], positive])
    assert len(edges) == L.POS_INF_BIN - L.NEG_INF_BIN
    width = torch.iinfo(_INT_VIEW[dtype]).bits
    largest = 2 ** (width - 1) - 1
    lowest_key, highest_key = bucket_keys(np.array([-largest - 1, largest]), dtype)
    keys = np.arange(lowest_key, highest_key + 1)
    edge_keys = bucket_keys(edges, dtype)
    # An edge that starts its bucket counts for the whole bucket; one inside it is the
    # bucket's edge, compared with each value's bits.
    starts = bucket_keys(edges - 1, dtype) < edge_keys
    low = L.NEG_INF_BIN + np.searchsorted(edge_keys, keys, side="left")
    np.add.at(low, edge_keys[starts] - lowest_key, 1)
    edge = np.full(len(keys), largest, dtype=np.int64)
    inner, counts = np.unique(edge_keys[~starts], return_counts=True)
    if (counts > 1).any():
        raise RuntimeError(f"two decade edges inside one bucket for {dtype}")
    edge[inner - lowest_key] = edges[~starts]
    return BinTable(
        shift=_SHIFT[dtype],
        offset=-int(lowest_key),
        low=torch.from_numpy(low.astype(np.int32)),
        edge=torch.from_numpy(edge.astype(_NUMPY[dtype][1])),
    )


_device_tables: dict[tuple[torch.dtype, torch.device], BinTable] = {}


def bin_table(dtype: torch.dtype, device: torch.device) -> BinTable:
    """The tables for float32 or float64 values on ``device`` (built once on the CPU)."""
    key = (dtype, device)
    table = _device_tables.get(key)
    if table is None:
        cpu = _cpu_table(dtype)
        table = BinTable(cpu.shift, cpu.offset, cpu.low.to(device), cpu.edge.to(device))
        _device_tables[key] = table
    return table


#: Entries binned at a time on the CPU: the few temporaries of a chunk stay in the caches
#: (a pass over memory-sized temporaries costs several times a pass within the caches).
CPU_CHUNK = 1 << 17


def bins_from_bits(flat: torch.Tensor, workspace=None, may_be_nan: bool = True) -> torch.Tensor:
    """(n,) int32 layout bin of each entry of ``flat`` ((n,) float32 or float64).

    A fixed sequence of integer passes whatever the values hold, chunk by chunk on the
    CPU. With a ``workspace`` (``stats.Workspace``) the temporaries and the result are its
    buffers, the result valid until its next use. ``may_be_nan`` False (the caller knows
    every entry is finite) skips the passes that move NaN to NAN_BIN.
    """
    dtype, device, n = flat.dtype, flat.device, flat.numel()
    table = bin_table(dtype, device)
    int_type = _INT_VIEW[dtype]
    chunk = max(1, min(n, CPU_CHUNK) if device.type == "cpu" else n)  # n may be 0

    def take(size: int, slot: str, kind: torch.dtype) -> torch.Tensor:
        if workspace is None:
            return torch.empty(size, dtype=kind, device=device)
        return workspace.take(size, kind, device, slot)

    bins = take(n, "bins", torch.int32)
    scratch = [take(chunk, f"decades{i}", int_type) for i in range(2)]
    converted = take(chunk, "decades-keys", torch.float32) if dtype == torch.float32 else None
    keys_buffer = take(chunk, "decades-keys", int_type) if converted is None else None
    nan = take(chunk, "decades-nan", torch.bool) if may_be_nan else None
    bits = flat.view(int_type)
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        size = stop - start
        part = bits[start:stop]
        sign, ordered = scratch[0][:size], scratch[1][:size]
        torch.bitwise_right_shift(part, torch.iinfo(int_type).bits - 1, out=sign)  # -1 or 0
        torch.bitwise_and(part, torch.iinfo(int_type).max, out=ordered)  # the magnitude
        if converted is not None:
            # Small integers (subnormals' bits) convert exactly, large ones keep 24 bits:
            # a bucket is at most an octave of values wide either way.
            keys = converted[:size].copy_(ordered).view(torch.int32)
            keys.bitwise_right_shift_(table.shift)
        else:  # a plain shift: no float64 subnormal reaches the lowest decade
            keys = torch.bitwise_right_shift(ordered, table.shift, out=keys_buffer[:size])
        # Negated for a negative value (~x = -1 - x), bits and key sort like the values.
        ordered.bitwise_xor_(sign)
        keys.bitwise_xor_(sign)
        keys += table.offset
        out = bins[start:stop]
        torch.index_select(table.low, 0, keys, out=out)
        edge = torch.index_select(table.edge, 0, keys, out=sign)
        out += torch.ge(ordered, edge, out=keys)
        if may_be_nan:  # NaN patterns lie beyond the infinities
            values = flat[start:stop]
            out.masked_fill_(torch.ne(values, values, out=nan[:size]), L.NAN_BIN)
    return bins
