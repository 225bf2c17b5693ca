"""Display-sized Snapshots: big matrices reduced on the run's device with the views' rules,
and the exact full-resolution values behind a display cell on request."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch

from gradviz.core.common import decimate
from gradviz.core.common.errors import GradvizError
from gradviz.core.common.health import Health
from gradviz.core.lab import display
from gradviz.core.lab.fit import DistanceFitRun
from gradviz.core.settings.config import FitConfig as _FitConfig

#: The small run these tests were written for (the shared defaults are the app's
#: teaching experiment, 200 points for 2000 steps); a test's own values win.
FitConfig = partial(_FitConfig, target="gaussian", n=10, method="safe", lr=1e-3, steps=500)


@pytest.mark.parametrize(("shape", "k"), [((2001, 2001), 7), ((50, 37), 4), ((64, 64), 1)])
def test_device_reduction_follows_the_views_rules(shape, k):
    rng = np.random.default_rng(0)
    values = rng.standard_normal(shape).astype(np.float32)
    values[5, 6], values[20, 3], values[-1, -1] = np.nan, np.inf, -np.inf
    other = rng.standard_normal(shape).astype(np.float32)
    codes = rng.integers(0, len(Health), shape).astype(np.uint8)

    means = display.reduce_mean(torch.from_numpy(values), k)
    expected = decimate.block_mean(values, k, k)
    np.testing.assert_allclose(means, expected, rtol=1e-5, atol=1e-6)
    assert np.isnan(means[5 // k, 6 // k]) and means[20 // k, 3 // k] == np.inf
    assert means[-1, -1] == -np.inf  # a lone -Inf in the last (partial) block stays visible
    diff = display.reduce_mean(torch.from_numpy(values), k, minus=torch.from_numpy(other))
    expected_diff = decimate.block_mean(values - other, k, k)
    np.testing.assert_allclose(diff, expected_diff, rtol=1e-4, atol=1e-5)
    maxima = display.reduce_max(torch.from_numpy(codes), k)
    np.testing.assert_array_equal(maxima, decimate.block_max(codes, k, k))


def _runs(method: str, n: int, max_display: int) -> tuple[DistanceFitRun, DistanceFitRun]:
    config = FitConfig(n=n, method=method, steps=5, lr=0.05, device="cpu")
    return DistanceFitRun(config, max_display=max_display), DistanceFitRun(config)


@pytest.mark.parametrize("method", ["naive", "safe"])
def test_a_decimated_cell_reads_the_runs_full_resolution_values(method):
    small, full = _runs(method, n=50, max_display=8)
    for run in (small, full):
        run.step()
        run.step(capture=True)
    shot, truth = small.snapshot(), full.snapshot()
    assert shot.display_block == 7 and shot.distances.shape == (8, 8)
    assert truth.display_block == 1 and truth.distances.shape == (50, 50)

    rows, cols = shot.full_indices(3), shot.full_indices(7)
    assert (rows, cols) == (range(21, 28), range(49, 50))
    for i, j in [(rows[0], cols[0]), (rows[-1], cols[0]), (10, 10)]:
        cell = small.cell_values(i, j, step=shot.step)
        for name in ("distances", "target_distances", "error", "entry_grads", "entry_health"):
            np.testing.assert_equal(cell[name], getattr(truth, name)[i, j], err_msg=name)
    # The display cell is the mean of its block; a NaN in the block stays NaN.
    block = truth.target_distances[rows.start : rows.stop, 0:7]
    np.testing.assert_allclose(shot.target_distances[3, 0], block.mean(), rtol=1e-6)
    assert shot.entry_health_counts == tuple(
        int(np.count_nonzero(truth.entry_health == h)) for h in Health
    )
    if method == "naive":  # the classic NaN on the diagonal, in every diagonal block
        assert all(np.isnan(shot.entry_grads[c, c]) for c in range(8))
        assert all(shot.entry_health[c, c] == Health.NAN for c in range(8))


def test_full_resolution_values_are_gone_once_the_run_moves_on():
    run, _ = _runs("safe", n=30, max_display=8)
    run.step(capture=True)
    shot = run.snapshot()
    run.step()
    with pytest.raises(GradvizError, match="the run has moved on"):
        run.cell_values(0, 1, step=shot.step)


def test_a_cell_outside_the_matrix_is_named():
    run, _ = _runs("safe", n=30, max_display=8)
    run.snapshot()
    with pytest.raises(GradvizError, match=r"Cell \(30, 0\) is outside the 30 x 30 matrix"):
        run.cell_values(30, 0)


def test_the_pinned_first_nan_reads_at_full_resolution_on_request():
    from gradviz.core.lab.anomaly import pinned_run, replay_to_first_nonfinite

    config = FitConfig(n=40, method="naive", steps=5, device="cpu")
    pinned = replay_to_first_nonfinite(config, max_display=8)
    full = replay_to_first_nonfinite(config)
    assert pinned.snapshot.distances.shape == (8, 8) and pinned.step == full.step == 0
    run = pinned_run(config, pinned)
    run.snapshot()
    for i, j in [(0, 0), (17, 17), (3, 30)]:
        cell = run.cell_values(i, j)
        np.testing.assert_equal(cell["entry_grads"], full.snapshot.entry_grads[i, j])
        assert cell["entry_health"] == full.snapshot.entry_health[i, j]
    assert (
        cell["entry_health"] != Health.NAN and run.cell_values(5, 5)["entry_health"] == Health.NAN
    )
