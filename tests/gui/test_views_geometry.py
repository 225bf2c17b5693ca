"""Procrustes alignment and PCA used by the points view (numpy only)."""

from __future__ import annotations

import numpy as np

from gradviz.gui.widgets import geometry
from gradviz.gui.widgets.synthetic import helix, random_rotation


def test_procrustes_recovers_a_rotated_and_shifted_copy():
    target = helix(50)
    rotation = random_rotation(3, seed=4)
    shift = np.array([3.0, -1.0, 0.5])
    moved = target @ rotation.T + shift  # points moved away from the target
    fit = geometry.rigid_procrustes(moved, target)
    np.testing.assert_allclose(fit.rotation, rotation, atol=1e-10)
    np.testing.assert_allclose(fit.apply(moved), target, atol=1e-10)


def test_procrustes_undoes_a_reflection_only_when_allowed():
    target = helix(40)
    mirrored = target * np.array([1.0, 1.0, -1.0])
    np.testing.assert_allclose(
        geometry.rigid_procrustes(mirrored, target).apply(mirrored), target, atol=1e-10
    )
    proper = geometry.rigid_procrustes(mirrored, target, allow_reflection=False)
    assert np.linalg.det(proper.rotation) > 0
    assert np.abs(proper.apply(mirrored) - target).max() > 0.1


def test_procrustes_keeps_distances_and_ignores_nonfinite_rows():
    rng = np.random.default_rng(1)
    target = rng.normal(size=(30, 2))
    moved = target @ random_rotation(2, seed=2).T + 0.01 * rng.normal(size=(30, 2))
    moved[7] = np.nan
    aligned = geometry.rigid_procrustes(moved, target).apply(moved)
    rows = np.arange(30) != 7
    np.testing.assert_allclose(aligned[rows], target[rows], atol=0.05)
    d_before = np.linalg.norm(moved[0] - moved[1])
    np.testing.assert_allclose(np.linalg.norm(aligned[0] - aligned[1]), d_before, rtol=1e-12)


def test_procrustes_without_finite_rows_is_the_identity():
    fit = geometry.rigid_procrustes(np.full((3, 2), np.nan), np.zeros((3, 2)))
    np.testing.assert_array_equal(fit.rotation, np.eye(2))


def test_pca_of_points_in_a_tilted_plane_keeps_their_distances():
    rng = np.random.default_rng(3)
    flat = rng.normal(size=(60, 2)) * np.array([3.0, 1.0])
    points = np.column_stack([flat, np.zeros(60)]) @ random_rotation(3, seed=5).T + 2.0
    projected = geometry.pca_projection(points).apply(points)
    d3 = np.linalg.norm(points[:, None] - points[None], axis=-1)
    d2 = np.linalg.norm(projected[:, None] - projected[None], axis=-1)
    np.testing.assert_allclose(d2, d3, atol=1e-10)
    # The first axis is the long one.
    assert projected[:, 0].std() > 2.0 * projected[:, 1].std()


def test_axis_projection_picks_the_chosen_coordinates():
    points = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(
        geometry.axis_projection(3, 0, 2).apply(points), points[:, [0, 2]]
    )
