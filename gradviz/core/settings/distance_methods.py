"""The distance-matrix methods of the fit lab, each said once: its name, the sentence that
explains it, and what one step of it holds in memory.

Every other list of methods is derived from DISTANCE_METHOD_TABLE, in its order:
``config.DISTANCE_METHODS`` (name -> explanation: the setup form's tooltips, ``gradviz fit
--help``, experiment-file checks), ``lab.distances.METHODS`` (name -> the function of that
name there) and ``lab.memory.STEP_MATRICES`` / ``CAPTURE_MATRICES``. A method is added here
and as one function in ``lab/distances.py``. This module imports neither torch nor Qt.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DistanceMethod:
    """One method. ``explanation``: one line, shown as a tooltip and in help.
    ``step_matrices``: (N, N) matrices in the run's dtype alive at the peak of one step.
    ``capture_matrices``: matrices in the run's dtype held between steps for the latest
    Snapshot: the target, the distances, their gradient, and the squared distances for the
    Gram methods (plus one byte an entry for the Health codes, counted apart)."""

    name: str
    explanation: str
    step_matrices: float
    capture_matrices: float


DISTANCE_METHOD_TABLE: tuple[DistanceMethod, ...] = (
    DistanceMethod(
        "naive",
        "Gram formula, sqrt over the whole matrix: NaN gradients from the zero diagonal.",
        step_matrices=8,
        capture_matrices=4,
    ),
    DistanceMethod(
        "masked",
        "Gram formula, sqrt of the off-diagonal only (the classic fix); NaN if the "
        "formula rounds a squared distance below zero.",
        step_matrices=12,
        capture_matrices=4,
    ),
    DistanceMethod(
        "clamp",
        "Gram formula, sqrt(max(sq, eps)): finite, but blocks gradients of close pairs.",
        step_matrices=9,
        capture_matrices=4,
    ),
    DistanceMethod(
        "safe",
        "Exact pairwise differences with a custom backward: never NaN (recommended).",
        step_matrices=5,
        capture_matrices=3,
    ),
    DistanceMethod(
        "cdist",
        "torch.cdist as users call it: Gram formula for large N, inexact for close pairs.",
        step_matrices=5,
        capture_matrices=3,
    ),
    DistanceMethod(
        "detach",
        "Gram formula and sqrt, diagonal of d detached after sqrt: still NaN (0 x Inf in "
        "sqrt's backward); the gradient must be stopped before sqrt.",
        step_matrices=9,
        capture_matrices=4,
    ),
)
