"""Downsampling and colour levels of the heatmaps (numpy only)."""

from __future__ import annotations

import numpy as np
import pytest

from gradviz.core.common.health import Health
from gradviz.gui.widgets import arrays


def _reference_block(a: np.ndarray, ky: int, kx: int, reduce) -> np.ndarray:
    """Straightforward loop over blocks, float64."""
    rows, cols = -(-a.shape[0] // ky), -(-a.shape[1] // kx)
    out = np.empty((rows, cols))
    for r in range(rows):
        for c in range(cols):
            out[r, c] = reduce(a[r * ky : (r + 1) * ky, c * kx : (c + 1) * kx].astype(np.float64))
    return out


def test_block_max_keeps_a_single_nan_of_a_2000_matrix():
    codes = np.zeros((2000, 2000), dtype=np.uint8)
    codes[1234, 567] = Health.NAN
    shown = arrays.block_max(codes, 4, 4)
    assert shown.shape == (500, 500)
    assert shown[1234 // 4, 567 // 4] == Health.NAN
    assert np.count_nonzero(shown == Health.NAN) == 1


def test_block_max_keeps_the_one_pixel_nan_diagonal_in_every_block():
    codes = np.full((2000, 2000), Health.FINITE, dtype=np.uint8)
    codes[np.arange(2000), np.arange(2000)] = Health.NAN
    shown = arrays.block_max(codes, 7, 7)  # 2000 is not a multiple of 7: edge blocks too
    assert shown.shape == (286, 286)
    assert (np.diag(shown) == Health.NAN).all()
    assert np.count_nonzero(shown == Health.NAN) == 286


def test_block_max_picks_the_most_alarming_category():
    codes = np.array([[Health.ZERO, Health.BLOCKED], [Health.POS_INF, Health.FINITE]], np.uint8)
    assert arrays.block_max(codes, 2, 2)[0, 0] == Health.POS_INF


@pytest.mark.parametrize(("ky", "kx"), [(1, 1), (2, 3), (4, 4), (5, 7)])
def test_block_mean_matches_a_float64_loop_including_edge_blocks(ky, kx):
    a = np.random.default_rng(0).random((23, 31)).astype(np.float32)
    shown = arrays.block_mean(a, ky, kx)
    assert shown.dtype == np.float32 and shown.flags.c_contiguous
    np.testing.assert_allclose(shown, _reference_block(a, ky, kx, np.mean), rtol=1e-5)


def test_block_mean_never_averages_a_nan_or_inf_away():
    a = np.ones((8, 8), dtype=np.float32)
    a[1, 1] = np.nan
    a[5, 0] = np.inf
    a[6, 6] = -np.inf
    shown = arrays.block_mean(a, 4, 4)
    assert np.isnan(shown[0, 0])
    assert shown[1, 0] == np.inf
    assert shown[1, 1] == -np.inf
    assert shown[0, 1] == 1.0


def test_symmetric_levels_centre_zero_and_ignore_nonfinite():
    a = np.array([[-0.3, 0.12], [np.nan, np.inf]], dtype=np.float32)
    lo, hi = arrays.symmetric_levels(a)
    assert lo == -hi
    assert 0.3 <= hi < 0.45


@pytest.mark.parametrize(
    ("value", "rung"), [(0.3, 0.3), (0.31, 0.5), (1.0, 1.0), (1.01, 1.5), (7.5, 10.0), (2e-7, 2e-7)]
)
def test_symmetric_levels_round_up_on_a_ladder(value, rung):
    assert arrays.ladder_ceil(value) == pytest.approx(rung)
    assert arrays.symmetric_levels(np.array([-value / 2, value]))[1] == pytest.approx(rung)


def test_sequential_levels_cover_the_finite_values():
    a = np.array([0.0, 2.37, np.nan, -np.inf])
    lo, hi = arrays.sequential_levels(a)
    assert lo <= 0.0 and 2.37 <= hi < 2.7


@pytest.mark.parametrize("values", [np.array([]), np.full(4, np.nan), np.full(3, np.inf)])
def test_levels_stay_finite_without_any_finite_value(values):
    for levels in (arrays.sequential_levels(values), arrays.symmetric_levels(values)):
        assert np.isfinite(levels).all() and levels[0] < levels[1]


def test_constant_matrix_gets_distinct_levels():
    lo, hi = arrays.sequential_levels(np.full((3, 3), 2.0))
    assert lo < 2.0 < hi


def test_display_factor_fits_the_matrix_into_the_screen_pixels():
    assert arrays.display_factor(2000, 500) == 4
    assert arrays.display_factor(2000, 450) == 5  # 400 image pixels <= 450 screen pixels
    assert arrays.display_factor(100, 500) == 1
    assert arrays.display_factor(100, 0) == 1


def test_nonfinite_codes_name_each_kind():
    codes = arrays.nonfinite_codes(np.array([1.0, -np.inf, np.inf, np.nan]))
    assert codes.tolist() == [0, 1, 2, 3]
