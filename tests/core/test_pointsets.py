"""Point sets: seeded generators in 2-D and 3-D, file round trips, and one clear message per
bad file."""

from __future__ import annotations

import os

import numpy as np
import pytest

from gradviz.core.common.errors import GradvizError
from gradviz.core.lab import pointsets
from gradviz.core.lab.pointsets import generate, load_points, resolve_points, save_points
from gradviz.core.settings.config import MAX_POINTS, POINT_GENERATORS


def test_generators_are_exactly_the_ones_the_settings_offer():
    assert list(pointsets._GENERATORS) == list(POINT_GENERATORS)


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("name", list(POINT_GENERATORS))
def test_every_generator_makes_distinct_finite_points_in_2d_and_3d(name, dim):
    if name == "helix" and dim == 2:
        pytest.skip("a helix needs three dimensions (its refusal is tested below)")
    points = generate(name, 37, dim, seed=3)
    assert points.shape == (37, dim) and points.dtype == np.float64
    assert np.isfinite(points).all()
    # Coincident points would make a degenerate target (zero distances off the diagonal).
    assert len(np.unique(points.round(12), axis=0)) == 37


@pytest.mark.parametrize("name", list(POINT_GENERATORS))
def test_generators_are_reproducible_for_a_seed(name):
    np.testing.assert_array_equal(generate(name, 20, 3, seed=7), generate(name, 20, 3, seed=7))


@pytest.mark.parametrize("name", ["gaussian", "uniform", "chain"])
def test_random_generators_change_with_the_seed(name):
    assert not np.array_equal(generate(name, 20, 3, seed=1), generate(name, 20, 3, seed=2))


def test_generators_leave_the_global_random_state_alone():
    np.random.seed(5)
    expected = np.random.rand()
    np.random.seed(5)
    generate("gaussian", 10, 3, seed=0)
    assert np.random.rand() == expected


def test_gaussian_points_look_standard_normal():
    points = generate("gaussian", 20_000, 3, seed=0)
    assert abs(points.mean()) < 0.02 and abs(points.std() - 1) < 0.02


@pytest.mark.parametrize("dim", [2, 3, 5])
def test_circle_points_lie_on_the_unit_sphere(dim):
    points = generate("circle", 50, dim, seed=0)
    np.testing.assert_allclose(np.linalg.norm(points, axis=1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("dim", [1, 2, 3, 4])
def test_chain_steps_all_have_the_backbone_length(dim):
    points = generate("chain", 40, dim, seed=1)
    steps = np.linalg.norm(np.diff(points, axis=0), axis=1)
    np.testing.assert_allclose(steps, pointsets.CHAIN_STEP, rtol=1e-12)


@pytest.mark.parametrize("n,dim", [(27, 3), (10, 2), (5, 1), (17, 4)])
def test_grid_points_sit_on_a_unit_spaced_lattice(n, dim):
    points = generate("grid", n, dim, seed=0)
    spacing = np.diff(np.unique(points[:, 0]))
    np.testing.assert_allclose(spacing, 1.0)
    assert len(np.unique(points, axis=0)) == n


def test_helix_winds_around_the_last_axis():
    points = generate("helix", 30, 3, seed=0)
    np.testing.assert_allclose(np.hypot(points[:, 0], points[:, 1]), 1.0)
    assert np.all(np.diff(points[:, -1]) > 0)


@pytest.mark.parametrize("name,dim", [("helix", 2), ("circle", 1), ("moons", 1), ("spiral", 1)])
def test_a_generator_that_cannot_make_a_dimension_says_so(name, dim):
    with pytest.raises(GradvizError, match=rf"'{name}' point set needs at least \d dimensions"):
        generate(name, 10, dim, seed=0)


def test_unknown_generator_lists_the_choices():
    with pytest.raises(GradvizError, match="Unknown point set 'blob'.*gaussian"):
        generate("blob", 10, 3)


def test_too_many_points_are_refused():
    with pytest.raises(GradvizError, match=f"between 2 and {MAX_POINTS:,}"):
        generate("gaussian", MAX_POINTS + 1, 3)


# ---- files -----------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".csv", ".npy"])
def test_saved_points_load_back_exactly(tmp_path, suffix):
    points = generate("gaussian", 15, 3, seed=4) * 1e3
    path = tmp_path / f"points{suffix}"
    save_points(path, points)
    np.testing.assert_array_equal(load_points(path), points)


def test_csv_reads_with_and_without_a_header_row(tmp_path):
    plain = tmp_path / "plain.csv"
    plain.write_text("1,2,3\n4, 5 ,6e0\n\n")
    header = tmp_path / "header.csv"
    header.write_text("x,y,z\n1,2,3\n4,5,6\n")
    expected = np.array([[1.0, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(load_points(plain), expected)
    np.testing.assert_array_equal(load_points(header), expected)


def test_integer_npy_is_read_as_float(tmp_path):
    path = tmp_path / "ints.npy"
    np.save(path, np.arange(6).reshape(3, 2))
    points = load_points(path)
    assert points.dtype == np.float64 and points.shape == (3, 2)


def test_resolve_points_takes_a_generator_name_or_a_file(tmp_path):
    path = tmp_path / "p.npy"
    np.save(path, np.eye(4))
    np.testing.assert_array_equal(resolve_points(f"file:{path}", 99, 9), np.eye(4))
    np.testing.assert_array_equal(
        resolve_points("uniform", 8, 2, seed=1), generate("uniform", 8, 2, seed=1)
    )


def _csv(text):
    return lambda path: path.write_text(text)


def _npy(array, **kwargs):
    return lambda path: np.save(path, array, **kwargs)


def _write_npz_as(path):
    with open(path, "wb") as f:
        np.savez(f, a=np.zeros((3, 2)))


BAD_FILES = {
    "non-numeric cell": ("p.csv", _csv("1,2,3\n4,abc,6\n"), r"line 2, field 2 is 'abc'"),
    "empty cell": ("p.csv", _csv("1,2,3\n4,,6\n"), r"line 2, field 2 is empty"),
    "semicolons": ("p.csv", _csv("1;2\n3;4\n"), r"line 2, field 1 is '3;4'.*comma-separated"),
    "ragged rows": ("p.csv", _csv("1,2,3\n4,5\n"), r"line 2 has 2 fields but line 1 has 3"),
    "ragged header": ("p.csv", _csv("x,y\n1,2,3\n"), r"line 2 has 3 fields but line 1 has 2"),
    "NaN in CSV": ("p.csv", _csv("1,2\nnan,3\n"), r"line 2, field 1 is 'nan'.*finite"),
    "Inf in CSV": ("p.csv", _csv("1,2\n3,-inf\n"), r"line 2, field 2 is '-inf'.*finite"),
    "one point": ("p.csv", _csv("x,y\n1,2\n"), r"holds 1 point; .*at least 2"),
    "header only": ("p.csv", _csv("x,y,z\n"), r"holds no points"),
    "empty file": ("p.csv", _csv(""), r"holds no points"),
    "binary as CSV": ("p.csv", lambda p: p.write_bytes(b"\xff\xfe\x00\x81"), r"not a text CSV"),
    "NaN in NPY": ("p.npy", _npy(np.array([[1.0, 2], [np.nan, 3]])), r"row 2, column 1 is nan"),
    "Inf in NPY": ("p.npy", _npy(np.array([[1.0, np.inf], [0, 3]])), r"row 1, column 2 is inf"),
    "1-D NPY": ("p.npy", _npy(np.arange(5.0)), r"shape \(5,\); save an \(N, D\) array"),
    "3-D NPY": ("p.npy", _npy(np.zeros((2, 3, 4))), r"shape \(2, 3, 4\)"),
    "one-point NPY": ("p.npy", _npy(np.zeros((1, 3))), r"holds 1 point"),
    "complex NPY": ("p.npy", _npy(np.zeros((3, 2), complex)), r"complex128 values"),
    "object NPY": (
        "p.npy",
        _npy(np.array([[1, "a"], [2, None]], dtype=object), allow_pickle=True),
        r"holds Python objects",
    ),
    "truncated NPY": (
        "p.npy",
        lambda p: p.write_bytes(b"\x93NUMPY\x01\x00v\x00{'descr': '<f8'"),
        r"not a valid \.npy file",
    ),
    "npz archive": ("p.npz", lambda p: np.savez(p, a=np.zeros((3, 2))), r"\.npz archive"),
    "npz named .npy": ("p.npy", lambda p: _write_npz_as(p), r"\.npz archive"),
    "too many CSV rows": (
        "p.csv",
        _csv("0,1\n" * (MAX_POINTS + 1)),
        rf"more than {MAX_POINTS:,} points \(line {MAX_POINTS + 1}\)",
    ),
    "too many NPY rows": (
        "p.npy",
        _npy(np.zeros((MAX_POINTS + 1, 2))),
        rf"{MAX_POINTS + 1:,} points",
    ),
}


def test_a_single_point_loads_where_one_row_is_enough_and_no_rows_never_do(tmp_path):
    one, none = tmp_path / "one.csv", tmp_path / "none.npy"
    one.write_text("1.5,2\n")
    np.save(none, np.zeros((0, 2)))
    np.testing.assert_array_equal(load_points(one, min_points=1), [[1.5, 2.0]])
    with pytest.raises(GradvizError, match=r"holds 0 points; save at least 1"):
        load_points(none, min_points=1)


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_each_bad_point_file_gets_one_message_naming_the_file(tmp_path, case):
    name, write, message = BAD_FILES[case]
    path = tmp_path / name
    write(path)
    with pytest.raises(GradvizError, match=message) as info:
        load_points(path)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_point_file_says_so(tmp_path):
    with pytest.raises(GradvizError, match=r"nope\.csv does not exist"):
        load_points(tmp_path / "nope.csv")


def test_directory_is_not_a_point_file(tmp_path):
    with pytest.raises(GradvizError, match="is a directory"):
        load_points(tmp_path)


def test_file_over_the_size_limit_is_refused_before_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(pointsets, "MAX_FILE_BYTES", 100)
    path = tmp_path / "big.csv"
    path.write_text("1,2\n" * 50)
    with pytest.raises(GradvizError, match=r"big\.csv is 0 MB, over the 0 MB limit"):
        load_points(path)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads anything")
def test_unreadable_point_file_says_to_check_permissions(tmp_path):
    path = tmp_path / "secret.csv"
    path.write_text("1,2\n3,4\n")
    path.chmod(0)
    with pytest.raises(GradvizError, match="Cannot read .*permissions"):
        load_points(path)


def test_empty_file_spec_is_refused():
    with pytest.raises(GradvizError, match="has no path"):
        resolve_points("file:", 10, 3)
