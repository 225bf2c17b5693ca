"""Point sets: seeded generators, CSV/NPY files, drawn points, and the checks that make a
file usable.

Every point set is an ``(N, D)`` float64 numpy array, one row per point. Generators are
seeded (same name, N, D and seed = same points) and never touch the global random state.
A bad file raises one GradvizError that names the file, where the problem is, and what to do.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.config import MAX_POINTS, MAX_SEED, POINT_GENERATORS
from gradviz.core.settings.drawn import is_drawn, parse_drawn
from gradviz.core.settings.table import FILE_PREFIX

#: The largest point file we read, in bytes.
MAX_FILE_BYTES = 100 * 1024 * 1024

#: Step length of the ``chain`` random walk (the C-alpha spacing of a protein, in Angstrom).
CHAIN_STEP = 3.8

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"
_ONE_POINT_PER_LINE = "write one point per line as comma-separated numbers"


# ---- generators -----------------------------------------------------------------------------
def generate(name: str, n: int, dim: int, seed: int = 0) -> np.ndarray:
    """``n`` points of generator ``name`` in ``dim`` dimensions: (n, dim) float64.

    Raises GradvizError for an unknown name, a bad size, or a dimension the generator
    cannot make (e.g. a helix needs at least 3).
    """
    if name not in _GENERATORS:
        raise GradvizError(
            f"Unknown point set {name!r}; choose one of: {', '.join(POINT_GENERATORS)} "
            "(or file:PATH)."
        )
    if not 2 <= n <= MAX_POINTS:
        raise GradvizError(f"N must be between 2 and {MAX_POINTS:,} points, got {n}.")
    min_dim = _MIN_DIM.get(name, 1)
    if dim < min_dim:
        raise GradvizError(
            f"The {name!r} point set needs at least {min_dim} dimensions, got D = {dim}; "
            f"set D (dim) to {min_dim} or more, or choose another point set."
        )
    rng = np.random.default_rng(check_seed(seed))
    points = _GENERATORS[name](n, dim, rng)
    return np.ascontiguousarray(points, dtype=np.float64)


def check_seed(seed: int) -> int:
    """Return ``seed`` if it is a whole number in [0, 2**63), else raise GradvizError."""
    if not (isinstance(seed, (int, np.integer)) and 0 <= seed <= MAX_SEED):
        raise GradvizError(f"The seed must be a whole number from 0 to 2**63 - 1, got {seed}.")
    return int(seed)


def _gaussian(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal((n, dim))


def _uniform(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(0.0, 1.0, (n, dim))


def _circle(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """Unit ring in 2-D (even angles), Fibonacci sphere in 3-D, random unit vectors above."""
    if dim == 2:
        angle = 2 * np.pi * np.arange(n) / n
        return np.column_stack([np.cos(angle), np.sin(angle)])
    if dim == 3:
        k = np.arange(n) + 0.5
        z = 1 - 2 * k / n
        r = np.sqrt(1 - z * z)
        phi = np.pi * (1 + 5**0.5) * k
        return np.column_stack([r * np.cos(phi), r * np.sin(phi), z])
    v = rng.standard_normal((n, dim))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _spiral(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """Archimedean spiral (radius grows with the angle), two turns, in the first two axes."""
    t = np.linspace(0.5, 4 * np.pi, n)
    points = np.zeros((n, dim))
    points[:, 0] = t * np.cos(t) / (4 * np.pi)
    points[:, 1] = t * np.sin(t) / (4 * np.pi)
    return points


def _helix(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """Three turns of a unit-radius helix around the last axis."""
    t = np.linspace(0, 6 * np.pi, n)
    points = np.zeros((n, dim))
    points[:, 0] = np.cos(t)
    points[:, 1] = np.sin(t)
    points[:, -1] = t / (2 * np.pi)
    return points


def _grid(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """The first n nodes of the smallest unit-spaced cubic grid that holds n, centred."""
    side = math.ceil(round(n ** (1 / dim), 9))
    while side**dim < n:  # guard against rounding in the root
        side += 1
    index = np.arange(n)
    points = np.stack([(index // side**axis) % side for axis in range(dim)], axis=1)
    return points - (side - 1) / 2


def _moons(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """Two interleaved half circles in the first two axes (the usual toy classification set)."""
    outer = (n + 1) // 2
    inner = n - outer
    a = np.linspace(0, np.pi, outer)
    b = np.linspace(0, np.pi, inner)
    points = np.zeros((n, dim))
    points[:outer, 0], points[:outer, 1] = np.cos(a), np.sin(a)
    points[outer:, 0], points[outer:, 1] = 1 - np.cos(b), 0.5 - np.sin(b)
    return points


def _chain(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """A random walk whose steps all have length CHAIN_STEP, starting at the origin."""
    steps = rng.standard_normal((n - 1, dim))
    norms = np.linalg.norm(steps, axis=1, keepdims=True)
    norms[norms == 0] = 1.0  # a zero draw has probability zero; keep it finite anyway
    steps = CHAIN_STEP * steps / norms
    return np.vstack([np.zeros((1, dim)), np.cumsum(steps, axis=0)])


_GENERATORS: dict[str, Callable[[int, int, np.random.Generator], np.ndarray]] = {
    "gaussian": _gaussian,
    "uniform": _uniform,
    "circle": _circle,
    "spiral": _spiral,
    "helix": _helix,
    "grid": _grid,
    "moons": _moons,
    "chain": _chain,
}

#: The smallest dimension each generator can make (1 where not listed).
_MIN_DIM = {"circle": 2, "spiral": 2, "helix": 3, "moons": 2}


# ---- specs ----------------------------------------------------------------------------------
def resolve_points(spec: str, n: int, dim: int, seed: int = 0) -> np.ndarray:
    """Points for a spec: a generator name (uses n, dim, seed), ``file:PATH`` or drawn
    points ``drawn:x,y x,y ...`` (these two set N and D)."""
    if is_drawn(spec):
        return np.array(parse_drawn(spec), dtype=np.float64)
    if spec.startswith(FILE_PREFIX):
        path = spec[len(FILE_PREFIX) :]
        if not path:
            raise GradvizError("The point spec 'file:' has no path; write file:PATH.")
        return load_points(path)
    return generate(spec, n, dim, seed)


# ---- files ----------------------------------------------------------------------------------
def load_points(path: str | os.PathLike, *, min_points: int = 2) -> np.ndarray:
    """Read a point set from a CSV or NPY file: (N, D) float64, N >= ``min_points``.

    The format follows the content (NPY magic bytes), else the suffix; anything else is
    read as CSV. ``min_points`` is 2 for a distance matrix; rows that are not paired up
    (e.g. network inputs) need only 1. Raises GradvizError naming the file and the problem.
    """
    path = Path(path)
    head = _check_file(path)
    if head.startswith(_ZIP_MAGIC) or path.suffix.lower() == ".npz":
        raise GradvizError(
            f"{path} is an .npz archive; save a single (N, D) array with numpy.save as .npy, "
            "or as CSV."
        )
    if head.startswith(_NPY_MAGIC) or path.suffix.lower() == ".npy":
        points = _load_npy(path)
    else:
        points = _load_csv(path)
    return _check_points(points, path, min_points)


def save_points(path: str | os.PathLike, points: np.ndarray) -> None:
    """Write (N, D) points as NPY (``.npy``) or CSV (anything else, with an x,y,z header)."""
    path = Path(path)
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2:
        raise GradvizError(f"Points to save must be an (N, D) array, got shape {points.shape}.")
    if path.suffix.lower() == ".npy":
        np.save(path, points, allow_pickle=False)
        return
    dim = points.shape[1]
    names = ["x", "y", "z"][:dim] if dim <= 3 else [f"x{k + 1}" for k in range(dim)]
    # 17 significant digits round-trip float64 exactly.
    np.savetxt(path, points, delimiter=",", header=",".join(names), comments="", fmt="%.17g")


def _check_file(path: Path) -> bytes:
    """Raise unless ``path`` is a readable file within the size limit; return its first bytes."""
    if not path.exists():
        raise GradvizError(f"Point file {path} does not exist; check the path.")
    if path.is_dir():
        raise GradvizError(f"{path} is a directory; give the path of a .csv or .npy file.")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise GradvizError(
            f"{path} is {size / 2**20:.0f} MB, over the {MAX_FILE_BYTES // 2**20} MB limit for "
            f"point files; use at most {MAX_POINTS:,} points."
        )
    try:
        with path.open("rb") as f:
            return f.read(8)
    except OSError as exc:
        raise GradvizError(
            f"Cannot read {path} ({exc.strerror or exc}); check its permissions."
        ) from None


def _load_npy(path: Path) -> np.ndarray:
    try:
        # Never unpickle: an object array in an .npy file can run code when loaded.
        array = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
            raise GradvizError(
                f"{path} holds Python objects, which gradviz does not load (they can run code); "
                "save a plain float array with numpy.save."
            ) from None
        raise GradvizError(
            f"{path} is not a valid .npy file ({exc}); save it again with numpy.save."
        ) from None
    except (OSError, EOFError) as exc:
        raise GradvizError(
            f"{path} is not a valid .npy file ({exc}); save it again with numpy.save."
        ) from None
    if not isinstance(array, np.ndarray):  # np.load returns an NpzFile for zip archives
        raise GradvizError(f"{path} is not a single array; save one (N, D) array as .npy.")
    if array.dtype.kind not in "iuf":
        raise GradvizError(
            f"{path} holds {array.dtype} values; save the points as a float array (N, D)."
        )
    if array.ndim != 2:
        raise GradvizError(
            f"{path} holds an array of shape {array.shape}; save an (N, D) array, "
            "one row per point."
        )
    return array.astype(np.float64)


def _load_csv(path: Path) -> np.ndarray:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise GradvizError(
            f"{path} is not a text CSV file (not UTF-8); {_ONE_POINT_PER_LINE}, or save .npy."
        ) from None
    except OSError as exc:
        raise GradvizError(f"Cannot read {path} ({exc.strerror or exc}).") from None
    rows: list[list[float]] = []
    width = None
    width_line = 0
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue  # blank lines (e.g. at the end) carry nothing
        cells = line.split(",")
        if width is None and _is_header(cells):
            width, width_line = len(cells), line_no
            continue
        if width is None:
            width, width_line = len(cells), line_no
        elif len(cells) != width:
            raise GradvizError(
                f"{path} line {line_no} has {len(cells)} fields but line {width_line} has "
                f"{width}; every point needs the same number of coordinates."
            )
        if len(rows) >= MAX_POINTS:
            raise GradvizError(
                f"{path} has more than {MAX_POINTS:,} points (line {line_no}); "
                f"use at most {MAX_POINTS:,}."
            )
        rows.append([_parse_cell(cell, path, line_no, k) for k, cell in enumerate(cells, 1)])
    if not rows:
        raise GradvizError(f"{path} holds no points; {_ONE_POINT_PER_LINE}.")
    return np.array(rows, dtype=np.float64)


def _is_header(cells: list[str]) -> bool:
    """A first row is a header when none of its cells is a number."""
    for cell in cells:
        try:
            float(cell)
        except ValueError:
            continue
        return False
    return True


def _parse_cell(cell: str, path: Path, line_no: int, field: int) -> float:
    text = cell.strip()
    try:
        value = float(text)
    except ValueError:
        what = "is empty" if not text else f"is {text[:40]!r}, not a number"
        raise GradvizError(
            f"{path} line {line_no}, field {field} {what}; {_ONE_POINT_PER_LINE}."
        ) from None
    if not math.isfinite(value):
        raise GradvizError(
            f"{path} line {line_no}, field {field} is {text!r}; coordinates must be finite "
            "numbers, so replace or drop that point."
        )
    return value


def _check_points(points: np.ndarray, path: Path, min_points: int = 2) -> np.ndarray:
    """Shape, size and finiteness checks shared by both formats; returns (N, D) float64."""
    n, dim = points.shape
    if dim < 1:
        raise GradvizError(f"{path} has points with no coordinates; save an (N, D) array.")
    if n < min_points:
        need = (
            "a distance matrix needs at least 2"
            if min_points == 2
            else f"save at least {min_points}"
        )
        raise GradvizError(f"{path} holds {n} point{'s' if n != 1 else ''}; {need}.")
    if n > MAX_POINTS:
        raise GradvizError(f"{path} holds {n:,} points; use at most {MAX_POINTS:,}.")
    bad = ~np.isfinite(points)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise GradvizError(
            f"{path} row {row + 1}, column {col + 1} is {points[row, col]}; coordinates must "
            "be finite numbers, so replace or drop that point."
        )
    return np.ascontiguousarray(points, dtype=np.float64)
