"""The explorer's input batches (shared with `gradviz jacobian`) and their limits."""

from __future__ import annotations

import numpy as np
import pytest

from gradviz.core.common.errors import GradvizError
from gradviz.core.explorer.batches import (
    MAX_BATCH,
    MAX_GRID_SIDE,
    InputSettings,
    make_inputs,
    random_batch,
)


def test_a_seed_always_gives_the_same_batch_and_another_seed_another():
    first = random_batch(8, 3, seed=5)
    assert first.shape == (8, 3) and first.dtype == np.float64
    np.testing.assert_array_equal(first, random_batch(8, 3, seed=5))
    assert not np.array_equal(first, random_batch(8, 3, seed=6))
    explorer = make_inputs(InputSettings(kind="random", batch=8, seed=5), in_dim=3)
    np.testing.assert_array_equal(explorer, first)


def test_samples_of_any_shape_are_drawn_from_the_same_stream():
    images = random_batch(4, (2, 3), seed=1)
    assert images.shape == (4, 2, 3)
    np.testing.assert_array_equal(images.reshape(4, 6), random_batch(4, 6, seed=1))


@pytest.mark.parametrize("batch", [0, MAX_BATCH + 1])
def test_batch_sizes_outside_the_limit_are_named(batch):
    with pytest.raises(GradvizError, match=f"between 1 and {MAX_BATCH:,}, not {batch}"):
        random_batch(batch, 2, seed=0)


def test_the_grid_side_limit_is_the_one_constant():
    at_limit = InputSettings(kind="grid", side=MAX_GRID_SIDE)
    assert make_inputs(at_limit, in_dim=2).shape == (MAX_GRID_SIDE**2, 2)
    with pytest.raises(GradvizError, match=f"between 2 and {MAX_GRID_SIDE}, not"):
        make_inputs(InputSettings(kind="grid", side=MAX_GRID_SIDE + 1), in_dim=2)


def test_grid_inputs_span_the_ranges_and_hold_the_others_at_the_base():
    settings = InputSettings(
        kind="grid", dims=(2, 0), x_range=(-1.0, 1.0), y_range=(0.0, 4.0), side=5, base=(7.0,)
    )
    grid = make_inputs(settings, in_dim=3)
    assert grid.shape == (25, 3)
    assert sorted(set(grid[:, 2])) == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert sorted(set(grid[:, 0])) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert set(grid[:, 1]) == {7.0}


def test_a_random_batch_over_a_gib_is_refused_in_a_sentence_for_the_app_and_the_cli():
    from gradviz.core.explorer.batches import random_batch

    # 100,000 images of 3 x 224 x 224 would be about 120 GB of float64.
    with pytest.raises(GradvizError, match="would need over 1 GiB; use a smaller batch"):
        random_batch(100_000, (3, 224, 224), 0)
    assert random_batch(4, (3, 8, 8), 0).shape == (4, 3, 8, 8)
