"""What the explorer asks the worker for, and what comes back (no torch, no Qt).

A job is a frozen description of one computation; a result holds plain numpy copies, so the
GUI never touches a live tensor. Index selections ("0-3, 7", "all") are parsed here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gradviz.core.errors import GradvizError

#: Input sources the explorer offers.
INPUT_KINDS: dict[str, str] = {
    "random": "random batch (normal, seeded)",
    "grid": "grid over two input dimensions",
    "file": "points from a CSV or NPY file",
}
#: Losses for the parameter-gradient histograms (keys of core.histograms.LOSSES).
HISTOGRAM_LOSSES: dict[str, str] = {
    "sum": "sum of outputs",
    "sumsq": "sum of squares of outputs",
    "mse": "MSE to a target file",
}
#: The largest grid side, so a field of (side^2, m, n) entries stays small enough to ship.
MAX_GRID_SIDE = 256
#: The largest random batch.
MAX_BATCH = 100_000


@dataclass(frozen=True)
class InputSettings:
    """Where the batch comes from. ``kind`` is a key of INPUT_KINDS.

    random: ``batch`` rows of a standard normal, seeded by ``seed``. grid: ``side`` x ``side``
    points over inputs ``dims`` spanning ``x_range`` x ``y_range``, the other inputs fixed at
    ``base`` (one value per input; the two grid dims are ignored there). file: ``path``.
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


@dataclass(frozen=True)
class ExplorerJob:
    """One computation: a network (spec + seed, or a module), inputs, histogram loss.

    ``module`` is the explorer's private copy of a network set with ``set_network``; it is
    only read (never trained) by the worker.
    """

    label: str
    in_dim: int
    out_dim: int
    inputs: InputSettings
    spec_text: str | None = None
    net_seed: int = 0
    module: Any = None
    dtype: str = "float32"
    loss: str = "sum"
    target_path: str = ""
    bins: int = 30


@dataclass(frozen=True)
class ExplorerResult:
    """Everything the views show, as numpy copies.

    jacobians (B, m, n); inputs (B, n); outputs (B, m); mean/std (m, n). ``full`` is the
    (B*m, B*n) batch Jacobian or None (B > 256: ``full_note`` says why). ``field`` is the
    grid's Jacobians (H, W, m, n) with ``field_xs`` (W,) and ``field_ys`` (H,), or None
    (``field_note``). ``histograms`` is a list of core LayerHistogram or None
    (``histogram_note``).
    """

    label: str
    jacobians: np.ndarray
    inputs: np.ndarray
    outputs: np.ndarray
    method: str
    reason: str
    mean: np.ndarray
    std: np.ndarray
    constant: bool
    tolerance: float
    full: np.ndarray | None = None
    max_off_block: float | None = None
    full_note: str = ""
    field: np.ndarray | None = None
    field_xs: np.ndarray | None = None
    field_ys: np.ndarray | None = None
    field_dims: tuple[int, int] = (0, 1)
    field_note: str = ""
    histograms: list | None = None
    histogram_note: str = ""
    seconds: float = 0.0

    @property
    def batch(self) -> int:
        return int(self.jacobians.shape[0])

    @property
    def shape(self) -> tuple[int, int]:
        """(m, n): outputs and inputs of the network."""
        return int(self.jacobians.shape[1]), int(self.jacobians.shape[2])


def parse_indices(text: str, count: int, what: str) -> list[int]:
    """Indices from text like ``all``, ``0-3, 7`` or ``5`` (ranges inclusive), in order.

    ``count`` is how many there are; GradvizError names a bad part or an index out of range.
    """
    text = text.strip().lower()
    if text in ("", "all", "*"):
        return list(range(count))
    chosen: list[int] = []
    for part in text.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        first, dash, last = part.partition("-")
        try:
            lo = int(first)
            hi = int(last) if dash else lo
        except ValueError:
            raise GradvizError(
                f"The {what} selection has a bad part {part!r}; write indices like 0-3, 7 or all."
            ) from None
        if not (0 <= lo <= hi < count):
            raise GradvizError(
                f"The {what} selection {part!r} is outside 0..{count - 1}; "
                f"there are {count} {what}s."
            )
        chosen.extend(k for k in range(lo, hi + 1) if k not in chosen)
    if not chosen:
        raise GradvizError(f"The {what} selection is empty; write indices like 0-3, 7 or all.")
    return chosen


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
