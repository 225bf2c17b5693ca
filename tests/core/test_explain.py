""" "Why NaN here?": explanations of real runs' first-NaN snapshots, checked against counts
made independently of the snapshot's own health codes."""

from __future__ import annotations

import math
from dataclasses import replace
from functools import partial

import numpy as np
import torch

from gradviz.core.common.health import Health
from gradviz.core.lab import explain
from gradviz.core.lab.explain import explain_first_nan
from gradviz.core.lab.fit import DistanceFitRun
from gradviz.core.lab.pointsets import generate, save_points
from gradviz.core.settings.config import FitConfig as _FitConfig

#: The small run these tests were written for (the shared defaults are the app's
#: teaching experiment, 200 points for 2000 steps); a test's own values win.
FitConfig = partial(_FitConfig, target="gaussian", n=10, method="safe", lr=1e-3, steps=500)


def first_nan_snapshot(**changes):
    """The snapshot a stop-on-NaN run pins: the step whose backward went non-finite."""
    run = DistanceFitRun(FitConfig(**{"steps": 20, "stop_on_nan": True, **changes}))
    while not run.done:
        run.step(capture=True)
    return run.snapshot()


def init_file(tmp_path, points: np.ndarray) -> str:
    path = tmp_path / "init.npy"
    save_points(path, points)
    return f"file:{path}"


def with_coincident_points(tmp_path, n: int = 10) -> str:
    """Initial points where 1, 3 and 5 coincide and so do 7 and 8: four pairs."""
    points = generate("gaussian", n, 3, seed=7)
    points[3] = points[5] = points[1]
    points[8] = points[7]
    return init_file(tmp_path, points)


def test_naive_first_nan_is_explained_by_sqrt_at_zero_on_the_diagonal():
    snap = first_nan_snapshot(method="naive")
    e = explain_first_nan(snap)
    assert e.causes == (explain.SQRT_AT_ZERO_DIAGONAL,)
    assert e.diagonal_zero == 10 == snap.n_points
    assert (e.coincident_pairs, e.negative_pairs, e.overflow_entries) == (0, 0, 0)
    assert "gradient of sqrt is infinite where the squared distance is 0" in e.text
    assert "10 entries on the diagonal" in e.text
    assert e.entry_counts["NaN"] == 10 and e.step == snap.step


def test_naive_with_coincident_points_counts_diagonal_and_coincident_pairs(tmp_path):
    e = explain_first_nan(first_nan_snapshot(method="naive", init=with_coincident_points(tmp_path)))
    assert e.causes == (explain.SQRT_AT_ZERO_DIAGONAL, explain.SQRT_AT_ZERO_PAIRS)
    assert (e.diagonal_zero, e.coincident_pairs, e.rounded_to_zero_pairs) == (10, 4, 0)
    assert "10 entries on the diagonal and 4 pairs of coincident points" in e.text
    assert set(e.example_pairs) == {(1, 3), (1, 5), (3, 5), (7, 8)}


def test_masked_with_coincident_points_blames_the_pairs_not_the_diagonal(tmp_path):
    snap = first_nan_snapshot(method="masked", init=with_coincident_points(tmp_path))
    e = explain_first_nan(snap)
    assert e.causes == (explain.SQRT_AT_ZERO_PAIRS,)
    assert (e.diagonal_zero, e.coincident_pairs) == (0, 4)
    # The gradient of the loss is not 0 between coincident points: sqrt' = Inf gives -Inf.
    assert e.entry_counts["-Inf"] == 8 and e.entry_counts["NaN"] == 0
    assert "'safe'" in e.text


def near_coincident_at_scale_100(tmp_path) -> str:
    """32 points at coordinate scale 100, each with a partner 1e-4 away."""
    rng = np.random.default_rng(0)
    base = 100 * rng.standard_normal((16, 3))
    return init_file(tmp_path, np.concatenate([base, base + 1e-4 * rng.standard_normal((16, 3))]))


def test_masked_on_near_coincident_points_at_scale_100_reports_negative_squared_distances(
    tmp_path,
):
    snap = first_nan_snapshot(method="masked", n=32, init=near_coincident_at_scale_100(tmp_path))
    e = explain_first_nan(snap)
    # Count the negative pairs independently: the Gram formula on the same float32 coordinates.
    x = torch.from_numpy(np.array(snap.coords))
    gram = x @ x.T
    sq = gram.diagonal()[:, None] + gram.diagonal()[None, :] - 2 * gram
    negative = int(torch.triu(sq < 0, diagonal=1).sum())
    assert negative >= 1
    assert e.negative_pairs == negative
    assert explain.NEGATIVE_SQUARED in e.causes and math.isnan(snap.loss)
    assert f"negative squared distances for {negative} pair" in e.text
    assert "forward pass" in e.text


def test_clamp_blocks_the_negative_squares_so_nothing_needs_explaining(tmp_path):
    snap = first_nan_snapshot(method="clamp", n=32, init=near_coincident_at_scale_100(tmp_path))
    assert (snap.squared < 0).any()  # the Gram formula still rounds below zero...
    e = explain_first_nan(snap)  # ...but clamp never takes sqrt there
    assert e.causes == () and e.negative_pairs == 0
    assert e.text == "No non-finite gradient in this snapshot."


def test_learning_rate_too_large_is_explained_as_overflow_of_growing_coordinates():
    snap = first_nan_snapshot(method="safe", optimizer="sgd", lr=1e3, steps=500)
    e = explain_first_nan(snap)
    assert e.causes == (explain.OVERFLOW,)
    assert np.isfinite(snap.coords).all() and not math.isfinite(snap.loss)
    assert e.overflow_entries == int(np.count_nonzero(~np.isfinite(snap.distances)))
    assert e.largest_coord == float(np.abs(snap.coords).max()) > 1e19
    assert "overflowed to Inf" in e.text and "lower the learning rate" in e.text


def test_coordinates_spoiled_by_an_earlier_update_are_named_as_the_cause():
    run = DistanceFitRun(FitConfig(method="naive", steps=5))  # no stop on NaN: Adam steps on
    run.step()
    run.step()
    snap = run.snapshot()
    e = explain_first_nan(snap)
    assert e.causes[0] == explain.NONFINITE_COORDS
    assert e.nonfinite_coords == int(np.count_nonzero(~np.isfinite(snap.coords))) > 0
    assert "first non-finite gradient was at step 0" in e.text
    assert "stop on NaN" in e.text


def test_safe_run_has_no_non_finite_gradient(tmp_path):
    snap = first_nan_snapshot(method="safe", steps=5, init=with_coincident_points(tmp_path))
    e = explain_first_nan(snap)
    assert e.causes == () and not e.has_nonfinite
    assert e.text == "No non-finite gradient in this snapshot."
    assert e.nonfinite_entries == e.nonfinite_coord_grads == 0


def test_network_run_that_diverges_is_explained_from_its_coordinates():
    snap = first_nan_snapshot(method="safe", net="3-16-3:tanh", optimizer="sgd", lr=1e6)
    e = explain_first_nan(snap)
    assert e.causes == (explain.OVERFLOW,)
    assert any(code >= Health.NEG_INF for _, code in snap.param_health)


def test_non_finite_gradient_without_a_known_cause_is_reported_as_unexplained():
    snap = first_nan_snapshot(method="safe", steps=1)
    health = np.array(snap.entry_health)
    health[0, 1] = health[1, 0] = Health.POS_INF
    e = explain_first_nan(replace(snap, entry_health=health))
    assert e.causes == (explain.UNEXPLAINED,)
    assert e.nonfinite_entries == 2 and "Diagnose" in e.text


def test_detach_after_sqrt_is_explained_as_too_late_with_the_fix_before_sqrt():
    snap = first_nan_snapshot(method="detach")
    e = explain_first_nan(snap)
    assert snap.step == 0 and e.causes == (explain.SQRT_AT_ZERO_DIAGONAL,)
    assert e.diagonal_zero == 10 and e.entry_counts["NaN"] == 10
    assert "Detaching the diagonal of d after sqrt does not help" in e.text
    assert "before sqrt" in e.text
