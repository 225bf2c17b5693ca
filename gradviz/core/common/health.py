"""Gradient-health categories, shared by the core and the views (numpy only).

The codes are ordered by how alarming they are, so that "the most alarming category of a
block" is simply the block's maximum (used to downsample masks without losing a NaN).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

import numpy as np


class Health(IntEnum):
    """Category of one gradient value; a larger code is more alarming."""

    FINITE = 0  # finite and non-zero: the gradient flows
    ZERO = 1  # exactly zero
    BLOCKED = 2  # the method stops the gradient here on purpose (its mask)
    NEG_INF = 3
    POS_INF = 4
    NAN = 5


HEALTH_LABELS: dict[Health, str] = {
    Health.FINITE: "finite",
    Health.ZERO: "zero",
    Health.BLOCKED: "blocked",
    Health.NEG_INF: "-Inf",
    Health.POS_INF: "+Inf",
    Health.NAN: "NaN",
}
#: The word for statistics a damaged recording lost, wherever they would be shown (Model
#: health, the Graph page, ``gradviz inspect``).
LOST = "lost"


def classify(values: np.ndarray, blocked: np.ndarray | None = None) -> np.ndarray:
    """Health code of every entry of ``values`` (any shape), as uint8 of the same shape.

    Where ``blocked`` is true the entry is BLOCKED unless its value is more alarming
    (a NaN behind a mask is still a NaN).
    """
    values = np.asarray(values)
    codes = np.full(values.shape, Health.FINITE, dtype=np.uint8)
    codes[values == 0] = Health.ZERO
    if blocked is not None:
        codes[np.asarray(blocked, dtype=bool)] = Health.BLOCKED
    codes[values == -np.inf] = Health.NEG_INF
    codes[values == np.inf] = Health.POS_INF
    codes[np.isnan(values)] = Health.NAN
    return codes


def counts(codes: np.ndarray) -> dict[Health, int]:
    """How many entries fall in each category."""
    tally = np.bincount(np.asarray(codes, dtype=np.uint8).ravel(), minlength=len(Health))
    return {h: int(tally[h]) for h in Health}


def worst(codes: np.ndarray) -> Health:
    """The most alarming category present (FINITE for an empty array)."""
    codes = np.asarray(codes)
    return Health(int(codes.max())) if codes.size else Health.FINITE


def worst_of_counts(counts: np.ndarray) -> np.ndarray:
    """(..., 5) counts (finite, zero, NaN, +Inf, -Inf, a recording's columns) -> (...)
    uint8 Health code: NaN, then +Inf, then -Inf where any entry is one, ZERO where every
    entry is zero, else FINITE (some zeros among finite values still flow)."""
    counts = np.asarray(counts)
    finite, zero, nan, pos_inf, neg_inf = (counts[..., k] for k in range(5))
    code = np.full(counts.shape[:-1], Health.FINITE, dtype=np.uint8)
    code[(finite == 0) & (zero > 0)] = Health.ZERO
    code[neg_inf > 0] = Health.NEG_INF
    code[pos_inf > 0] = Health.POS_INF
    code[nan > 0] = Health.NAN
    return code


@dataclass(frozen=True)
class GroupHealth:
    """The gradient health of a group of tensors at one step (a graph node: one parameter,
    or every tensor inside a module), the one rule the Graph page and ``inspect --graph``
    both show.

    ``worst``: ``worst_of_counts`` of the counts summed over the tensors whose record at
    that step is kept, or None where every one is lost. ``norm``: the L2 norm of the finite
    entries of the kept tensors' gradients together (a recording's ``grad_norm`` is its
    tensor's over finite entries). ``counts``: (finite, zero, NaN, +Inf, -Inf) summed over
    the kept tensors; ``lost``: how many tensors are lost."""

    worst: int | None
    norm: float
    counts: tuple[int, int, int, int, int]
    lost: int

    def norm_words(self, format_value: Callable[[float], str]) -> str:
        """The group's norm for people (``norm_words``)."""
        _, _, nan, pos_inf, neg_inf = self.counts
        return norm_words(self.norm, nan, pos_inf + neg_inf, format_value)


def norm_words(finite_norm: float, nan: int, inf: int, format_value: Callable[[float], str]) -> str:
    """A gradient's norm for people, from the norm of its finite entries (what a recording
    keeps) and its counts of NaN and infinite entries: where there are any, the whole
    gradient's norm is nan or inf, and the finite entries' norm is said beside it
    ("nan (finite entries 0.0065)"). The one wording of Model health and the Graph page."""
    if nan == 0 and inf == 0:
        return format_value(finite_norm)
    return f"{'nan' if nan else 'inf'} (finite entries {format_value(finite_norm)})"


def group_health(counts: np.ndarray, norms: np.ndarray, lost: np.ndarray) -> GroupHealth:
    """GroupHealth of k tensors: ``counts`` (k, 5), ``norms`` (k,) of each one's finite
    entries, ``lost`` (k,) bool: whose record at the step is lost."""
    kept = ~np.asarray(lost, bool)
    counts = np.asarray(counts, np.int64).reshape(-1, 5)[kept]
    norms = np.asarray(norms, np.float64)[kept]
    summed = counts.sum(axis=0)
    return GroupHealth(
        worst=int(worst_of_counts(summed)) if kept.any() else None,
        norm=float(np.sqrt(np.sum(np.square(norms)))),
        counts=tuple(int(c) for c in summed),
        lost=int((~kept).sum()),
    )
