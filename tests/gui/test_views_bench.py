"""Refresh rate of the distance-fit views (benchmark: `pytest -m bench tests/gui`)."""

from __future__ import annotations

import pytest

from gradviz.bench.gui_views import measure_refresh

# Issue 4, target 3: the distance views together refresh >= 40/s at N = 1000, >= 20/s at 2000.
TARGETS = {1000: 40.0, 2000: 20.0}


@pytest.mark.bench
@pytest.mark.parametrize("n", sorted(TARGETS))
def test_distance_views_refresh_fast_enough(qapp, n):
    rate = measure_refresh(n, 3.0, distance_views_only=True)
    worst = measure_refresh(n, 3.0, distance_views_only=True, changing_mask=True)
    every = measure_refresh(n, 3.0)
    print(
        f"N = {n}: distance views {rate:.1f}/s ({worst:.1f}/s with a changing mask), "
        f"all views {every:.1f}/s"
    )
    assert min(rate, worst) >= TARGETS[n]
