"""Histogram bins read from float bits are bitwise the bins of the log10 path they replace, for
zeros, subnormals, normals, infinities, NaN payloads, both signs and every decade edge."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gradviz.core.record import decades, stats
from gradviz.core.record import layout as L

INT = {torch.float32: np.int32, torch.float64: np.int64}
FLOAT = {torch.float32: np.float32, torch.float64: np.float64}


def log10_bins(values: torch.Tensor) -> torch.Tensor:
    """The bins as gradviz computed them before reading bits: floor(log10|g|), clamped,
    signed, offset, NaN to NAN_BIN (float64 clamped at 1e38 first, Inf lifted a decade)."""
    flat = values.reshape(-1)
    if flat.dtype != torch.float64:
        flat = flat.to(torch.float32)
        decade = torch.log10(flat.abs())
    else:
        decade = torch.log10(flat.abs().clamp_max_(10.0 ** (L.HIGHEST_DECADE - 1)))
        decade += torch.isinf(flat)
    decade.floor_().clamp_(L.LOWEST_DECADE - 1, L.HIGHEST_DECADE)
    decade -= L.LOWEST_DECADE - 1
    decade.copysign_(flat)
    decade += L.ZERO_BIN
    return decade.nan_to_num_(float(L.NAN_BIN)).to(torch.int32)


def from_bits(bits: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    return torch.from_numpy(bits.astype(INT[dtype]).view(FLOAT[dtype]).copy())


def around_every_edge(dtype: torch.dtype, ulps: int) -> torch.Tensor:
    """Every value within ``ulps`` bit patterns of each decade edge and of the float nearest
    each power of ten, positive and negative."""
    edges = np.array(decades.decade_edges(dtype)[:-2], dtype=np.int64)
    exact = np.array([10.0**d for d in range(L.LOWEST_DECADE, L.HIGHEST_DECADE)])
    nearest = exact.astype(FLOAT[dtype]).view(INT[dtype]).astype(np.int64)
    centres = np.concatenate([edges, nearest])
    bits = (centres[:, None] + np.arange(-ulps, ulps + 1)[None, :]).ravel()
    positive = from_bits(bits[bits >= 0], dtype)
    return torch.cat([positive, -positive])


def special_values(dtype: torch.dtype) -> torch.Tensor:
    info = torch.finfo(dtype)
    int_type = INT[dtype]
    width = np.iinfo(int_type).bits
    exponent = 2 ** (width - 1) - 2 ** (width - 1 - (11 if width == 64 else 8))
    infinity = exponent  # all exponent bits, no mantissa bits
    nan_patterns = from_bits(
        np.array([infinity + 1, infinity + 2**20, 2 ** (width - 1) - 1], dtype=np.int64), dtype
    )
    values = torch.tensor(
        [0.0, math.inf, info.max, info.tiny, info.smallest_normal, info.eps, 1.0, 10.0],
        dtype=dtype,
    )
    smallest = torch.zeros(1, dtype=dtype).nextafter(torch.ones(1, dtype=dtype))
    below = values.nextafter(torch.zeros_like(values))
    values = torch.cat([values, below, smallest, nan_patterns])
    return torch.cat([values, -values, torch.tensor([math.nan], dtype=dtype)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bins_equal_the_log10_bins_around_every_decade_edge(dtype):
    values = torch.cat([around_every_edge(dtype, 600), special_values(dtype)])
    assert torch.equal(decades.bins_from_bits(values), log10_bins(values))


def test_every_subnormal_float32_stride_and_both_ends_get_the_log10_bin():
    bits = np.concatenate(
        [np.arange(0, 1 << 23, 97), np.arange(0, 4096), (1 << 23) - np.arange(1, 4097)]
    )
    values = from_bits(bits, torch.float32)
    values = torch.cat([values, -values])
    assert torch.equal(decades.bins_from_bits(values), log10_bins(values))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_histogram_bins_equal_the_log10_bins_across_all_magnitudes(dtype):
    generator = torch.Generator().manual_seed(4)
    scale = 10.0 ** torch.randint(-50, 45, (50_000,), generator=generator).double()
    values = (torch.randn(50_000, generator=generator, dtype=torch.float64) * scale).to(dtype)
    values[::7] = 0.0
    values[1::101] = math.nan
    values[2::103] = -math.inf
    assert torch.equal(stats.histogram_bins(values), log10_bins(values))


def test_known_finite_values_and_any_chunking_give_the_same_bins(monkeypatch):
    generator = torch.Generator().manual_seed(5)
    values = torch.randn(10_001, generator=generator) * 1e-39  # normals and subnormals
    values[::3] = 0.0
    expected = log10_bins(values)
    assert torch.equal(decades.bins_from_bits(values, may_be_nan=False), expected)
    monkeypatch.setattr(decades, "CPU_CHUNK", 1000)
    workspace = stats.Workspace()
    assert torch.equal(decades.bins_from_bits(values, workspace), expected)
    assert torch.equal(decades.bins_from_bits(values[:2500], workspace), expected[:2500])


def test_decade_edges_rise_by_a_decade_each_and_end_at_infinity_then_nan():
    for dtype in (torch.float32, torch.float64):
        edges = decades.decade_edges(dtype)
        assert len(edges) == L.DECADES + 2
        values = from_bits(np.array(edges[:-2]), dtype).double().numpy()
        powers = 10.0 ** np.arange(L.LOWEST_DECADE, L.HIGHEST_DECADE)
        spacing = np.maximum(1e-5 * powers, 2 * float(torch.finfo(dtype).smallest_normal) * 2**-23)
        assert np.all(np.abs(values - powers) <= spacing)
        assert math.isinf(from_bits(np.array([edges[-2]]), dtype).item())
        assert math.isnan(from_bits(np.array([edges[-1]]), dtype).item())
    assert decades.decade_edges(torch.float32)[0] == 1  # the smallest subnormal


def test_an_empty_gradient_has_no_bins():
    for dtype in (torch.float32, torch.float64):
        assert decades.bins_from_bits(torch.zeros(0, dtype=dtype)).shape == (0,)
        assert stats.histogram_bins(torch.zeros(0, 3, dtype=dtype), stats.Workspace()).numel() == 0
