"""The explorer's batches: where the inputs of a Jacobian computation come from (no torch).

One construction for the app's explorer and the CLI's ``gradviz jacobian``, so the same seed
gives the same random batch everywhere: ``random_batch`` draws from numpy's default_rng in
float64 and callers cast to their dtype. The limits here (batch size, grid side) are the ones
the explorer's editors and the CLI both enforce.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gradviz.core.common.errors import GradvizError
from gradviz.core.lab.pointsets import check_seed

#: Input sources the explorer offers.
INPUT_KINDS: dict[str, str] = {
    "random": "random batch (normal, seeded)",
    "grid": "grid over two input dimensions",
    "file": "points from a CSV or NPY file",
    "image": "an image file (PNG, JPEG)",
}
#: The most bytes of inputs read from a file (as float64).
MAX_INPUT_BYTES = 1 << 30
#: The largest grid side, so a field of (side^2, m, n) entries stays small enough to ship.
MAX_GRID_SIDE = 256
#: The largest random batch.
MAX_BATCH = 100_000


@dataclass(frozen=True)
class InputSettings:
    """Where the batch comes from. ``kind`` is a key of INPUT_KINDS.

    random: ``batch`` rows of a standard normal, seeded by ``seed``. grid: ``side`` x ``side``
    points over inputs ``dims`` spanning ``x_range`` x ``y_range``, the other inputs fixed at
    ``base`` (one value per input; the two grid dims are ignored there). file: ``path``
    (CSV rows, or an NPY array (B, *in_shape)). image: ``samples``, the image at ``path`` as
    the app read it, (1, C, H, W) float64 in [0, 1] (core reads no image formats).
    The grid settings also define the gradient field whatever the kind.
    """

    kind: str = "random"
    batch: int = 64
    seed: int = 0
    dims: tuple[int, int] = (0, 1)
    x_range: tuple[float, float] = (-2.0, 2.0)
    y_range: tuple[float, float] = (-2.0, 2.0)
    side: int = 48
    base: tuple[float, ...] = ()
    path: str = ""
    samples: np.ndarray | None = field(default=None, compare=False, repr=False)


def random_batch(batch: int, shape: int | tuple[int, ...], seed: int) -> np.ndarray:
    """``batch`` standard-normal samples of ``shape`` (an input width or a full sample shape)
    from numpy's default_rng(``seed``): (B, *shape) float64. GradvizError for a batch size
    outside 1..MAX_BATCH, over MAX_INPUT_BYTES of samples or a bad seed."""
    check_batch_size(batch)
    sample = (shape,) if isinstance(shape, int) else tuple(shape)
    if batch * math.prod(sample) * 8 > MAX_INPUT_BYTES:
        raise GradvizError(
            f"A random batch of {batch} inputs of shape {sample} would need over 1 GiB; "
            "use a smaller batch."
        )
    return np.random.default_rng(check_seed(seed)).standard_normal((batch, *sample))


def check_batch_size(batch: int) -> int:
    """Return ``batch`` if it is 1..MAX_BATCH, else raise GradvizError."""
    if not 1 <= batch <= MAX_BATCH:
        raise GradvizError(f"The batch size must be between 1 and {MAX_BATCH:,}, not {batch}.")
    return batch


def make_inputs(
    settings: InputSettings, in_dim: int, in_shape: tuple[int, ...] | None = None
) -> np.ndarray:
    """The batch float64 for these settings: (B, n), or (B, *in_shape) for a model whose
    samples have a shape of their own (``in_shape``; None means (in_dim,))."""
    if in_shape is not None and len(in_shape) > 1:
        return _shaped_inputs(settings, in_shape)
    if settings.kind == "random":
        return random_batch(settings.batch, in_dim, settings.seed)
    if settings.kind == "image":
        return _checked_shape(_image_samples(settings), (in_dim,), "image")
    if settings.kind == "grid":
        xs, ys = grid_axes(settings)
        grid = np.repeat(base_values(settings, in_dim)[None, :], len(xs) * len(ys), axis=0)
        gy, gx = np.meshgrid(ys, xs, indexing="ij")
        first, second = grid_dims(settings, in_dim)
        grid[:, first] = gx.ravel()
        grid[:, second] = gy.ravel()
        return grid
    if settings.kind == "file":
        from gradviz.core.lab.pointsets import load_points

        if not settings.path:
            raise GradvizError("Choose an input file (CSV or NPY, one input per row) first.")
        samples = load_npy_samples(settings.path)
        if samples is not None:
            return _checked_shape(samples, (in_dim,), "file")
        points = load_points(settings.path)
        if points.shape[1] != in_dim:
            raise GradvizError(
                f"The input file has {points.shape[1]} columns but the network takes "
                f"{in_dim} inputs; give one row of {in_dim} numbers per input."
            )
        return points
    raise GradvizError(f"Unknown input source {settings.kind!r}.")


def _shaped_inputs(settings: InputSettings, in_shape: tuple[int, ...]) -> np.ndarray:
    """(B, *in_shape) inputs: a random batch, an NPY file of that shape, or an image."""
    if settings.kind == "random":
        return random_batch(settings.batch, in_shape, settings.seed)
    if settings.kind == "image":
        return _checked_shape(_image_samples(settings), in_shape, "image")
    if settings.kind == "file":
        if not settings.path:
            raise GradvizError("Choose an input file (an NPY array of shape (B, ...)) first.")
        samples = load_npy_samples(settings.path, min_dims=2)
        if samples is None:
            raise GradvizError(
                f"The model takes samples of shape {in_shape}: give an NPY file of shape "
                f"(B, {', '.join(str(s) for s in in_shape)})."
            )
        return _checked_shape(samples, in_shape, "file")
    raise GradvizError(
        f"The grid needs a model with inputs of shape (B, n); this one takes samples of shape "
        f"{in_shape}: use a random batch, an NPY file or an image."
    )


def _image_samples(settings: InputSettings) -> np.ndarray:
    if settings.samples is None:
        raise GradvizError("Choose an image file (PNG or JPEG) first.")
    return np.asarray(settings.samples, dtype=np.float64)


def _checked_shape(samples: np.ndarray, in_shape: tuple[int, ...], what: str) -> np.ndarray:
    """``samples`` if each has shape ``in_shape``; (B, n) rows of the right size are
    reshaped, anything else is a GradvizError naming both shapes."""
    if tuple(samples.shape[1:]) == tuple(in_shape):
        return samples
    if samples[0].size == int(np.prod(in_shape)) and len(in_shape) == 1:
        return samples.reshape(len(samples), *in_shape)
    raise GradvizError(
        f"The {what} gives samples of shape {tuple(samples.shape[1:])} but the model takes "
        f"samples of shape {tuple(in_shape)}."
    )


def load_npy_samples(path: str, min_dims: int = 3) -> np.ndarray | None:
    """An NPY file of at least ``min_dims`` dimensions as float64 (B, *in_shape), read
    without pickles; None for anything else (CSV, or arrays that load_points reads as
    rows). GradvizError for empty, non-numeric, non-finite or over-1-GiB arrays."""
    try:
        with open(path, "rb") as handle:
            if handle.read(6) != b"\x93NUMPY":
                return None
        array = np.load(path, allow_pickle=False, mmap_mode="r")
    except (OSError, ValueError):
        return None
    if array.ndim < min_dims:
        return None
    if array.dtype.kind not in "fiu" or 0 in array.shape:
        raise GradvizError(
            f"{path} holds a {array.dtype} array of shape {array.shape}; inputs must be "
            "non-empty numbers."
        )
    if array.nbytes > MAX_INPUT_BYTES:
        raise GradvizError(f"{path} holds over 1 GiB of inputs; give a smaller batch.")
    samples = np.array(array, dtype=np.float64)  # a copy: the memory map is read-only
    if not np.isfinite(samples).all():
        raise GradvizError(f"{path} holds NaN or Inf; inputs must be finite numbers.")
    return samples


def grid_dims(settings: InputSettings, in_dim: int) -> tuple[int, int]:
    """The two inputs the grid varies; GradvizError unless they differ and exist."""
    first, second = settings.dims
    if in_dim < 2 or first == second or not (0 <= first < in_dim and 0 <= second < in_dim):
        raise GradvizError(
            f"The grid needs two different input dimensions between 0 and {in_dim - 1}; "
            f"got {first} and {second}."
        )
    return first, second


def grid_side(settings: InputSettings) -> int:
    if not 2 <= settings.side <= MAX_GRID_SIDE:
        raise GradvizError(
            f"The grid side must be between 2 and {MAX_GRID_SIDE}, not {settings.side}."
        )
    return settings.side


def grid_axes(settings: InputSettings) -> tuple[np.ndarray, np.ndarray]:
    """The grid's x values (W,) and y values (H,), float64."""
    side = grid_side(settings)
    return np.linspace(*settings.x_range, side), np.linspace(*settings.y_range, side)


def base_values(settings: InputSettings, in_dim: int) -> np.ndarray:
    """The fixed values of the inputs that are not on the grid: (n,) float64."""
    base = settings.base
    if not base:
        return np.zeros(in_dim)
    if len(base) == 1:
        return np.full(in_dim, base[0], dtype=np.float64)
    if len(base) != in_dim:
        raise GradvizError(
            f"Give one fixed value for every input ({in_dim}), or a single value for all; "
            f"got {len(base)}."
        )
    return np.asarray(base, dtype=np.float64)


def parse_floats(text: str, what: str) -> tuple[float, ...]:
    """Comma-separated numbers (empty text gives ()); GradvizError names a bad one."""
    values = []
    for part in text.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        try:
            values.append(float(part))
        except ValueError:
            raise GradvizError(f"The {what} has a part that is not a number: {part!r}.") from None
    return tuple(values)


def parse_sample_shape(text: str, what: str = "The input shape") -> tuple[int, ...] | None:
    """``3,32,32`` (or ``3x32x32``): the shape of one sample, positive sizes; empty text
    gives None. GradvizError (starting with ``what``) for anything else."""
    if not text.strip():
        return None
    parts = [part.strip() for part in text.replace("x", ",").split(",")]
    shape = tuple(int(part) for part in parts) if all(p.isdigit() for p in parts) else ()
    if not shape or min(shape) < 1:
        raise GradvizError(
            f"{what} takes positive sizes separated by commas (e.g. 3,32,32), not {text!r}."
        )
    return shape
