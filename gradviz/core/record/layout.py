"""What one recorded step holds, column by column: the layout the writer and reader share.

Per watched tensor and recorded step, one row of ``STAT_COLUMNS`` floats followed by the
histogram's ``BINS`` counts. The histogram has fixed signed log-magnitude bins (one per
decade of |g|, from 1e-45, below float32's smallest subnormal, to 1e39, above its largest
value), so histograms of different steps and tensors are comparable, plus explicit NaN,
-Inf, zero and +Inf bins. Bin order follows the value axis: NaN, -Inf, negative values from
large to small magnitude, zero, positive values from small to large magnitude, +Inf.
"""

from __future__ import annotations

import numpy as np

FORMAT_VERSION = 1
#: Root-group attribute that marks a directory as a gradviz recording.
MARKER = "gradviz"
#: Rank groups are named ``rank<r>``.
RANK_PREFIX = "rank"

#: Columns before the histogram: L2 norm of the finite gradient entries, largest finite
#: |g|, parameter L2 norm, L2 norm of the update the optimizer applied after the step (NaN
#: where unknown: a bare tensor, or the last step), flat index of the first non-finite
#: gradient entry (meaningful only where the histogram counts a NaN or Inf).
STAT_COLUMNS: tuple[str, ...] = (
    "grad_norm",
    "max_abs",
    "param_norm",
    "update_norm",
    "first_bad_index",
)

LOWEST_DECADE = -45
HIGHEST_DECADE = 39
DECADES = HIGHEST_DECADE - LOWEST_DECADE  # bins per sign

NAN_BIN = 0
NEG_INF_BIN = 1
FIRST_NEGATIVE_BIN = 2
ZERO_BIN = FIRST_NEGATIVE_BIN + DECADES
FIRST_POSITIVE_BIN = ZERO_BIN + 1
POS_INF_BIN = FIRST_POSITIVE_BIN + DECADES
BINS = POS_INF_BIN + 1

ROW_WIDTH = len(STAT_COLUMNS) + BINS

#: Fill code of health-image pixels outside the recorded matrix (a smaller one than the first).
NO_ENTRY = 255


def counts_from_histogram(hist: np.ndarray) -> np.ndarray:
    """(..., BINS) -> (..., 5) counts of finite non-zero, zero, NaN, +Inf, -Inf entries."""
    negative = hist[..., FIRST_NEGATIVE_BIN:ZERO_BIN].sum(-1)
    positive = hist[..., FIRST_POSITIVE_BIN:POS_INF_BIN].sum(-1)
    return np.stack(
        [
            negative + positive,
            hist[..., ZERO_BIN],
            hist[..., NAN_BIN],
            hist[..., POS_INF_BIN],
            hist[..., NEG_INF_BIN],
        ],
        axis=-1,
    )


def bad_kind(nan: float, pos_inf: float, neg_inf: float) -> str | None:
    """The kind named for a first non-finite gradient: "nan", "+inf", "-inf", or None."""
    if nan:
        return "nan"
    if pos_inf:
        return "+inf"
    if neg_inf:
        return "-inf"
    return None
