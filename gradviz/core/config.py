"""Run settings as plain dataclasses.

This module imports neither torch nor Qt, so the settings forms can be built (and the
window shown) before torch has finished importing. The name tables here are the single
source of the choices the CLI and the forms offer; the torch-side registries must agree
with them (a test checks).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from gradviz.core.errors import GradvizError

#: Distance-matrix methods, with the one-line explanation shown as a tooltip / help.
DISTANCE_METHODS: dict[str, str] = {
    "naive": "Gram formula, sqrt over the whole matrix: NaN gradients from the zero diagonal.",
    "masked": "Gram formula, sqrt of the off-diagonal only (the classic fix); NaN if the "
    "formula rounds a squared distance below zero.",
    "clamp": "Gram formula, sqrt(max(sq, eps)): finite, but blocks gradients of close pairs.",
    "safe": "Exact pairwise differences with a custom backward: never NaN (recommended).",
    "cdist": "torch.cdist as users call it: Gram formula for large N, inexact for close pairs.",
}

#: Point-set generators.
POINT_GENERATORS: dict[str, str] = {
    "gaussian": "standard normal points (the classic example)",
    "uniform": "uniform in the unit cube",
    "circle": "evenly spaced on a ring (2-D) or a sphere (3-D and up)",
    "spiral": "an Archimedean spiral in the first two axes",
    "helix": "a helix around the last axis",
    "grid": "a regular grid",
    "moons": "two interleaved half circles",
    "chain": "a random walk with a fixed step, like a protein backbone",
}

OPTIMIZERS: dict[str, str] = {
    "adam": "Adam (torch.optim.Adam)",
    "sgd": "plain SGD (torch.optim.SGD)",
}

DTYPES: tuple[str, ...] = ("float32", "float64")

ACTIVATIONS: tuple[str, ...] = ("identity", "relu", "tanh", "sigmoid", "gelu", "softplus")

JACOBIAN_METHODS: tuple[str, ...] = ("auto", "loop", "batchsum", "jacrev", "jacfwd")

#: A guard against typos, not the real limit: whether N points fit is decided by memory
#: before a run starts (core.memory; about 20,000 points in float32 need 8 GB). 100,000
#: points need 200 GB, more than any one device holds today.
MAX_POINTS = 100_000


@dataclass(frozen=True)
class FitConfig:
    """Everything that defines one distance-fit run.

    ``target`` and ``init`` are a generator name or ``file:PATH`` (CSV or NPY); ``init`` may
    also be ``random`` (seeded standard normal). A file sets N and D. ``net`` is a network
    spec (``8-64-3:tanh``) that produces the coordinates from seeded per-point features, or
    None for free coordinates.
    """

    target: str = "gaussian"
    n: int = 10
    dim: int = 3
    init: str = "random"
    method: str = "safe"
    net: str | None = None
    optimizer: str = "adam"
    lr: float = 1e-3
    steps: int = 500
    seed: int = 0
    device: str = "auto"
    dtype: str = "float32"
    threads: int | None = None
    stop_on_nan: bool = False

    def validated(self) -> FitConfig:
        """Return self, or raise GradvizError naming the first bad setting."""
        _require(self.method in DISTANCE_METHODS, "method", self.method, DISTANCE_METHODS)
        _require(self.optimizer in OPTIMIZERS, "optimizer", self.optimizer, OPTIMIZERS)
        _require(self.dtype in DTYPES, "dtype", self.dtype, DTYPES)
        if not self.target.startswith("file:"):
            _require(self.target in POINT_GENERATORS, "target", self.target, POINT_GENERATORS)
        if not (self.init == "random" or self.init.startswith("file:")):
            _require(self.init in POINT_GENERATORS, "init", self.init, POINT_GENERATORS)
        if not 2 <= self.n <= MAX_POINTS:
            raise GradvizError(f"N must be between 2 and {MAX_POINTS:,} points, got {self.n}.")
        if self.dim < 1:
            raise GradvizError(f"The dimension D must be at least 1, got {self.dim}.")
        if not self.lr > 0:
            raise GradvizError(f"The learning rate must be positive, got {self.lr}.")
        if self.steps < 0:
            raise GradvizError(f"The number of steps cannot be negative, got {self.steps}.")
        if self.threads is not None and self.threads < 1:
            raise GradvizError(f"Threads must be at least 1, got {self.threads}.")
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FitConfig:
        """Build from a dict (an experiment file); unknown keys are an error, not ignored."""
        return settings_from_dict(cls, data)

    def with_changes(self, **changes: Any) -> FitConfig:
        return replace(self, **changes)


_KINDS: dict[str, tuple[type, str]] = {
    "int": (int, "a whole number"),
    "float": (float, "a number"),
    "str": (str, "a text"),
    "bool": (bool, "true or false"),
}


def settings_from_dict(cls: type, data: dict[str, Any], what: str = "setting") -> Any:
    """An instance of the settings dataclass ``cls`` from a hand-written dict: unknown keys
    and values of the wrong type are named in one GradvizError, never ignored."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise GradvizError(
            f"Unknown {what}(s) {', '.join(unknown)}; known {what}s are {', '.join(sorted(known))}."
        )
    return cls(**{name: _checked_value(cls, name, value) for name, value in data.items()})


def _checked_value(cls: type, name: str, value: Any) -> Any:
    """``value`` for field ``name`` if it has the field's type (ints pass as floats), else a
    GradvizError; files are hand-written, so a wrong type must not surface as a TypeError."""
    annotation = next(f.type for f in fields(cls) if f.name == name)
    parts = [part.strip() for part in str(annotation).split("|")]
    if value is None and "None" in parts:
        return None
    kind, words = _KINDS[parts[0]]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    raise GradvizError(f"Setting {name!r} must be {words}, got {value!r}.")


def _require(ok: bool, what: str, value: object, choices) -> None:
    if not ok:
        raise GradvizError(f"Unknown {what} {value!r}; choose one of: {', '.join(choices)}.")
