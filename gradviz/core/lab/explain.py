""" "Why NaN here?": a short explanation of a snapshot's non-finite gradients, built from its data.

The desktop app shows this beside the pinned first-NaN snapshot. It reads only the
snapshot's numpy arrays (squared distances, distances, coordinates, gradient health), so it
is instant and needs no torch: it counts where the squared distance is exactly 0 (on the
diagonal, between coincident points, or between distinct points the Gram formula rounded to
0), where the Gram formula went negative, and whether the values overflowed or the
coordinates themselves were already spoiled, and says so in a few sentences.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from gradviz.core.common.health import HEALTH_LABELS, Health, counts
from gradviz.core.lab.snapshot import Snapshot

#: Cause codes, in the order the text gives them (most fundamental first).
NONFINITE_COORDS = "nonfinite_coords"  # the coordinates were already NaN/Inf
OVERFLOW = "overflow"  # finite coordinates, but their squared distances overflowed
NEGATIVE_SQUARED = "negative_squared"  # the Gram formula rounded a squared distance below 0
SQRT_AT_ZERO_DIAGONAL = "sqrt_at_zero_diagonal"  # sqrt taken at 0 on the diagonal
SQRT_AT_ZERO_PAIRS = "sqrt_at_zero_pairs"  # sqrt taken at 0 between two points
UNEXPLAINED = "unexplained"  # non-finite gradients none of the above accounts for

#: At most this many example pairs are listed (for highlighting in the views).
MAX_EXAMPLE_PAIRS = 10


@dataclass(frozen=True)
class Explanation:
    """Why a snapshot has non-finite gradients (or that it has none).

    ``causes`` is empty when every gradient is finite. Pair counts are of unordered pairs
    (i < j) of points; entry counts are of (N, N) matrix entries.
    """

    text: str  # a few sentences for the "Why NaN here?" panel
    causes: tuple[str, ...]
    step: int
    method: str
    nonfinite_entries: int  # matrix entries whose gradient is NaN, +Inf or -Inf
    nonfinite_coord_grads: int  # coordinate gradients that are NaN, +Inf or -Inf
    diagonal_zero: int  # diagonal entries with squared distance 0 and a non-finite gradient
    coincident_pairs: int  # pairs of identical points with a non-finite gradient
    rounded_to_zero_pairs: int  # distinct points at squared distance 0, non-finite gradient
    negative_pairs: int  # pairs with squared distance below 0 and a non-finite gradient
    overflow_entries: int  # entries whose squared distance / distance is not finite
    nonfinite_coords: int  # coordinate values that are NaN or Inf
    largest_coord: float  # largest finite |coordinate|
    example_pairs: tuple[tuple[int, int], ...] = ()  # a few (i, j), i < j, to highlight
    entry_counts: dict[str, int] = field(default_factory=dict)  # Health label -> entries

    @property
    def has_nonfinite(self) -> bool:
        return bool(self.causes)


def explain_first_nan(snapshot: Snapshot) -> Explanation:
    """Explain the non-finite gradients of ``snapshot`` (normally the pinned first-NaN one)."""
    s = snapshot
    bad_entry = s.entry_health >= Health.NEG_INF  # NaN, +Inf or -Inf (codes ordered by alarm)
    coords_bad = ~np.isfinite(s.coords)
    finite_coords = s.coords[~coords_bad]
    largest = float(np.abs(finite_coords).max()) if finite_coords.size else 0.0
    # The matrix under the sqrt where the method has one, else the distances themselves.
    under = s.squared if s.squared is not None else s.distances
    overflow = np.argwhere(~np.isfinite(under))
    spoiled_points = coords_bad.any(axis=1)
    overflow = overflow[~spoiled_points[overflow].any(axis=1)]  # not already explained
    zero = np.argwhere((under == 0) & bad_entry)
    on_diagonal = zero[:, 0] == zero[:, 1]
    diagonal_zero = int(np.count_nonzero(on_diagonal))
    zero_pairs = _unordered(zero[~on_diagonal])
    identical = np.all(s.coords[zero_pairs[:, 0]] == s.coords[zero_pairs[:, 1]], axis=1)
    coincident, rounded = zero_pairs[identical], zero_pairs[~identical]
    negative = _unordered(np.argwhere((under < 0) & bad_entry))

    nonfinite_entries = int(np.count_nonzero(bad_entry))
    nonfinite_grads = int(np.count_nonzero(s.coord_health >= Health.NEG_INF))
    param_bad = any(code >= Health.NEG_INF for _, code in s.param_health)
    any_nonfinite = bool(nonfinite_entries or nonfinite_grads or param_bad or coords_bad.any())
    causes = []
    if coords_bad.any():
        causes.append(NONFINITE_COORDS)
    if len(overflow):
        causes.append(OVERFLOW)
    if negative.size:
        causes.append(NEGATIVE_SQUARED)
    if diagonal_zero:
        causes.append(SQRT_AT_ZERO_DIAGONAL)
    if coincident.size or rounded.size:
        causes.append(SQRT_AT_ZERO_PAIRS)
    if not any_nonfinite:
        causes = []  # nothing non-finite to explain (an overflow alone is not a NaN)
    elif not causes:
        causes.append(UNEXPLAINED)

    facts = Explanation(
        text="",
        causes=tuple(causes),
        step=s.step,
        method=s.method,
        nonfinite_entries=nonfinite_entries,
        nonfinite_coord_grads=nonfinite_grads,
        diagonal_zero=diagonal_zero,
        coincident_pairs=len(coincident),
        rounded_to_zero_pairs=len(rounded),
        negative_pairs=len(negative),
        overflow_entries=len(overflow),
        nonfinite_coords=int(np.count_nonzero(coords_bad)),
        largest_coord=largest,
        example_pairs=_examples(negative, coincident, rounded),
        entry_counts={HEALTH_LABELS[h]: c for h, c in counts(s.entry_health).items()},
    )
    return _with_text(facts, s)


def _with_text(e: Explanation, s: Snapshot) -> Explanation:
    if not e.causes:
        text = "No non-finite gradient in this snapshot."
        if not np.isfinite(s.loss):
            text += f" The loss is {s.loss}, though: look at the forward pass."
        return replace(e, text=text)
    sentences = []
    if NONFINITE_COORDS in e.causes:
        first = s.first_nonfinite_grad_step
        sentences.append(
            f"The coordinates themselves are not finite ({e.nonfinite_coords} of "
            f"{s.coords.size} values): an earlier optimizer step applied non-finite gradients"
            + (f" (the first non-finite gradient was at step {first})" if first is not None else "")
            + ". Turn on stop on NaN to keep the step where it began."
        )
    if OVERFLOW in e.causes:
        what = "squared distances" if s.squared is not None else "distances"
        sentences.append(
            f"The coordinates grew to {e.largest_coord:.3g}, so {e.overflow_entries} "
            f"{what} overflowed to Inf{_loss_trend(s)}: the optimizer "
            "diverged; lower the learning rate."
        )
    if NEGATIVE_SQUARED in e.causes:
        sentences.append(
            f"The Gram formula gave negative squared distances for {_n(e.negative_pairs, 'pair')} "
            "(rounding error for points much closer to each other than to the origin), so sqrt "
            "returned NaN already in the forward pass. The method 'safe' computes distances "
            "from coordinate differences and stays exact."
        )
    if SQRT_AT_ZERO_DIAGONAL in e.causes or SQRT_AT_ZERO_PAIRS in e.causes:
        sentences.append(_sqrt_at_zero_sentence(e))
    if UNEXPLAINED in e.causes:
        sentences.append(
            f"{_n(e.nonfinite_entries, 'matrix entry', 'matrix entries')} and "
            f"{_n(e.nonfinite_coord_grads, 'coordinate gradient')} are not finite, at finite, "
            "non-zero squared distances; use Diagnose to find the operation that made them."
        )
    return replace(e, text=" ".join(sentences))


def _sqrt_at_zero_sentence(e: Explanation) -> str:
    where = []
    if e.diagonal_zero:
        where.append(f"{_n(e.diagonal_zero, 'entry', 'entries')} on the diagonal")
    if e.coincident_pairs:
        where.append(f"{_n(e.coincident_pairs, 'pair')} of coincident points")
    if e.rounded_to_zero_pairs:
        where.append(
            f"{_n(e.rounded_to_zero_pairs, 'pair')} of distinct points whose squared distance "
            "the Gram formula rounded to 0"
        )
    text = (
        "The gradient of sqrt is infinite where the squared distance is 0: "
        + " and ".join(where)
        + "."
    )
    if e.diagonal_zero:
        text += (
            " On the diagonal the loss gradient is 0, and 0 x Inf = NaN, which then reaches "
            "every coordinate."
        )
    if e.method == "detach" and e.diagonal_zero:
        return text + (
            " Detaching the diagonal of d after sqrt does not help: it sets the gradient at d "
            "to 0, and sqrt's backward still multiplies that 0 by Inf. Stop the gradient "
            "before sqrt instead (gradviz.stop_gradient on the squared distances, or the "
            "method 'masked'); 'safe' avoids it entirely."
        )
    if e.coincident_pairs or e.rounded_to_zero_pairs:
        return text + " The method 'safe' gives coincident points a zero gradient instead."
    return text + " The methods 'masked' (sqrt of the off-diagonal only) and 'safe' avoid it."


def _unordered(index: np.ndarray) -> np.ndarray:
    """(K, 2) distinct pairs (i, j), i < j, from (M, 2) matrix indices with i != j."""
    pairs = np.sort(index, axis=1)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    return np.unique(pairs, axis=0).reshape(-1, 2)


def _examples(*groups: np.ndarray) -> tuple[tuple[int, int], ...]:
    pairs = [(int(i), int(j)) for group in groups for i, j in group]
    return tuple(pairs[:MAX_EXAMPLE_PAIRS])


def _loss_trend(s: Snapshot) -> str:
    history = s.loss_history[np.isfinite(s.loss_history)]
    if len(history) < 2 or not history[-1] > history[0]:
        return ""
    return f" (the loss rose from {history[0]:.3g} at step 0 to {history[-1]:.3g})"


def _n(count: int, singular: str, plural: str | None = None) -> str:
    return f"{count} {singular if count == 1 else (plural or singular + 's')}"
