"""StepSeries: a per-step record that stays bounded on long runs, thinned as the timeline
thins its snapshots, keeping the first and newest step and every change of finiteness."""

from __future__ import annotations

import numpy as np
import pytest

from gradviz.core.common.step_series import StepSeries, nonfinite_stretches

CAPACITY = 4096
STEPS = 200_000


def _values(step: int) -> tuple[float, float]:
    """A loss and a norm for ``step``: NaN loss on every 997th step and over 10,001-10,499
    (odd ends: thinned away unless kept on purpose), Inf norm from 190,001 on; finite
    otherwise (and distinct per step)."""
    loss = float("nan") if step % 997 == 0 and step else 1.0 / (step + 1)
    if 10_001 <= step < 10_500:
        loss = float("nan")
    norm = float("inf") if step >= 190_001 else float(step)
    return loss, norm


def _true_stretches(column: int) -> np.ndarray:
    bad = np.array([not np.isfinite(_values(k)[column]) for k in range(STEPS)])
    return nonfinite_stretches(np.arange(STEPS), np.where(bad, np.nan, 0.0))


@pytest.fixture(scope="module")
def long_series() -> StepSeries:
    series = StepSeries(2, capacity=CAPACITY)
    for step in range(STEPS):
        series.append(step, _values(step))
    return series


def test_a_long_series_stays_bounded_and_spans_the_whole_run(long_series):
    assert len(long_series) <= CAPACITY
    steps = long_series.steps
    assert steps[0] == 0 and steps[-1] == STEPS - 1  # the first and the newest step
    assert np.all(np.diff(steps) > 0) and long_series.interval > 1
    assert not long_series.every_step and long_series.exact_finiteness


def test_every_non_finite_step_and_stretch_is_kept_exactly(long_series):
    steps = long_series.steps
    lone = [k for k in range(997, STEPS, 997)]  # each lone NaN step, none thinned away
    assert set(lone) <= set(steps.tolist())
    for column in (0, 1):
        kept = nonfinite_stretches(steps, long_series.column(column))
        np.testing.assert_array_equal(kept, _true_stretches(column))


def test_kept_rows_hold_the_values_of_their_own_steps(long_series):
    expected = np.array([_values(int(k)) for k in long_series.steps]).T
    np.testing.assert_array_equal(long_series.values, expected)


def test_without_a_capacity_every_step_is_kept():
    series = StepSeries(1)
    for step in range(5000):
        series.append(step, [float("nan") if step == 7 else float(step)])
    assert series.every_step and len(series) == 5000
    np.testing.assert_array_equal(series.steps, np.arange(5000))
    assert np.isnan(series.column(0)[7])


def test_a_run_that_changes_finiteness_every_step_stays_bounded_and_says_so():
    series = StepSeries(1, capacity=256)
    for step in range(20_000):
        series.append(step, [float("nan") if step % 2 else 1.0])
    assert len(series) <= 256 and not series.exact_finiteness
    assert series.steps[0] == 0 and series.steps[-1] == 19_999
