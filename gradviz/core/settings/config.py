"""Run settings as plain dataclasses, each field described once.

Every field carries its title, tooltip, limits or choices, form group and whether a change
applies live or needs a reset (``setting(...)``, read by gradviz.core.settings.table): the
setup form, the CLI's ``gradviz fit`` options and experiment-file validation all come from
these declarations. This module imports neither torch nor Qt, so the settings form can be
built (and the window shown) before torch has finished importing. The torch-side registries
must agree with the name tables here (a test checks).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from gradviz.core.common.run_threads import AUTO_RULE
from gradviz.core.settings.distance_methods import DISTANCE_METHOD_TABLE
from gradviz.core.settings.table import check_settings, setting, settings_from_dict

#: Distance-matrix methods, with the one-line explanation shown as a tooltip / help (from
#: the one table of methods, distance_methods.DISTANCE_METHOD_TABLE).
DISTANCE_METHODS: dict[str, str] = {m.name: m.explanation for m in DISTANCE_METHOD_TABLE}

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

#: Losses for the explorer's parameter-gradient histograms (gradviz.core.explorer.histograms).
HISTOGRAM_LOSSES: dict[str, str] = {
    "sum": "sum of outputs",
    "sumsq": "sum of squares of outputs",
    "mse": "MSE to a target file",
}

#: A guard against typos, not the real limit: whether N points fit is decided by memory
#: before a run starts (core.memory; about 20,000 points in float32 need 8 GB). 100,000
#: points need 200 GB, more than any one device holds today.
MAX_POINTS = 100_000
#: The largest point dimension D.
MAX_DIM = 1024
#: The largest seed: seeds go to numpy and torch, which both take whole numbers below 2**63.
MAX_SEED = 2**63 - 1
#: The largest batch for which the full (B*m, B*n) batch Jacobian is built (it grows as B^2);
#: here, not in core.jacobians, so that the CLI and the app can check it before torch loads.
MAX_FULL_BATCH = 256


@dataclass(frozen=True)
class FitConfig:
    """Everything that defines one distance-fit run.

    The defaults are the app's teaching experiment (a helix of 200 points fitted with the
    masked method), and the same for ``gradviz fit`` and for keys an experiment file leaves
    out: one set of defaults everywhere.

    ``target`` and ``init`` are a generator name, ``file:PATH`` (CSV or NPY) or drawn points
    (``drawn:x,y x,y ...``); ``init`` may also be ``random`` (seeded standard normal). A file
    or drawn points set N and D. ``net`` is a network
    spec (``8-64-3:tanh``) that produces the coordinates from seeded per-point features, or
    None for free coordinates. Each field's ``setting(...)`` is its row in the settings
    table (gradviz.core.settings.table): the form, the CLI and experiment files read it.
    """

    target: str = setting(
        "helix",
        title="target set",
        tooltip="Point set to recover from its distance matrix: a generator or a CSV/NPY file.",
        group="Target points",
        choices=POINT_GENERATORS,
        accepts_file=True,
        editor="points",
        metavar="SPEC",
        cli_help="generator name, file:PATH (CSV/NPY) or drawn:x,y x,y ... (points "
        "written out); a file or drawn points set N and D",
    )
    n: int = setting(
        200,
        title="N points",
        tooltip="Number of points (a file sets it).",
        group="Target points",
        limits=(2, MAX_POINTS),
    )
    dim: int = setting(
        3,
        title="D dimensions",
        tooltip="Dimension of the points (a file sets it).",
        group="Target points",
        limits=(1, MAX_DIM),
    )
    init: str = setting(
        "random",
        title="initial coords",
        tooltip="Where the fitted coordinates start: seeded random normal, a generator, or a file.",
        group="Coordinates",
        choices={"random": "seeded standard normal coordinates", **POINT_GENERATORS},
        accepts_file=True,
        metavar="SPEC",
        cli_help="initial coordinates: random, a generator name, or file:PATH",
    )
    method: str = setting(
        "masked",
        title="method",
        tooltip="How the distance matrix is computed from the coordinates.",
        group="Distance method",
        choices=DISTANCE_METHODS,
    )
    net: str | None = setting(
        None,
        title="coordinate source",
        tooltip="Fit the coordinates directly, or produce them with a small network.",
        group="Coordinates",
        editor="network",
        metavar="SPEC",
        cli_help="produce coordinates with a network, e.g. 8-64-3:tanh",
    )
    optimizer: str = setting(
        "adam",
        title="optimiser",
        tooltip="The torch optimiser that takes the steps.",
        group="Optimiser",
        choices=OPTIMIZERS,
    )
    lr: float = setting(
        0.01,
        title="learning rate",
        tooltip="Step size; a change takes effect at the next step.",
        group="Optimiser",
        live=True,
        limits=(1e-8, 1e6),  # large rates provoke divergence on purpose
        cli_help="step size of the optimizer",
    )
    steps: int = setting(
        2000, title="steps", tooltip="Optimiser steps of a run.", group="Optimiser",
        limits=(0, 10**9),
    )  # fmt: skip
    seed: int = setting(
        0,
        title="seed",
        tooltip="Seed of the generators, the initial coordinates and the network weights.",
        group="Target points",
        limits=(0, MAX_SEED),
    )
    device: str = setting(
        "auto",
        title="device",
        tooltip="Where the run computes (devices that exist on this machine).",
        group="Compute",
        editor="device",
        cli_help="auto, cpu, cuda, cuda:N or mps",
    )
    dtype: str = setting(
        "float32",
        title="dtype",
        tooltip="Floating-point precision of the run.",
        group="Compute",
        choices=DTYPES,
    )
    threads: int | None = setting(
        None,
        title="torch threads",
        tooltip="torch CPU threads of the run's steps (unset: auto).",
        group="Compute",
        limits=(1, 256),
        metavar="N",
        cli_help="torch CPU threads of the run's steps",
        unset=AUTO_RULE,
        unset_word="auto",
    )
    stop_on_nan: bool = setting(
        False,
        title="stop on NaN",
        tooltip="Stop before an optimiser step whose gradient has a NaN or Inf.",
        group="Optimiser",
        cli_help="stop before an optimizer step on non-finite gradients",
    )

    def validated(self) -> FitConfig:
        """Return self, or raise GradvizError naming the first bad setting."""
        return check_settings(self)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FitConfig:
        """Build from a dict (an experiment file); unknown keys are an error, not ignored."""
        return settings_from_dict(cls, data)

    def with_changes(self, **changes: Any) -> FitConfig:
        return replace(self, **changes)


@dataclass(frozen=True)
class LiveSettings:
    """How the app shows a run (not part of the run itself)."""

    frame_rate: float = setting(
        30.0,
        title="frame rate (/s)",
        tooltip=(
            "The most the views redraw a second while running: a frame also waits several "
            "times as long as the window took to draw the last one, so the run keeps most of "
            "the time; ~2/s runs at nearly full speed."
        ),
        group="Display",
        live=True,
        limits=(0.5, 60.0),
    )

    def validated(self) -> LiveSettings:
        return check_settings(self)


#: The app's settings dataclasses: a run's FitConfig and the display's LiveSettings.
APP_SETTINGS: tuple[type, ...] = (FitConfig, LiveSettings)
