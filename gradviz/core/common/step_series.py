"""A per-step record of a few numbers that stays bounded however long a run goes.

``StepSeries`` keeps K values (a loss, gradient norms) for each step appended. Without a
capacity it keeps every step (``gradviz fit``: its ``--out`` has every step's loss). With
one, it is thinned as the timeline thins its snapshots: every step on the current
``interval`` (step % interval == 0) is kept, and when the rows pass the capacity the
interval doubles and the rows off it are dropped, so the series always spans the whole run,
ever more thinly. Kept whatever the interval:

- the first step and the newest one;
- both sides of every change of finiteness: the last step before and the first step after
  any value turns NaN or Inf or finite again (a change of the pattern of which values are
  finite), so a lone non-finite step is never thinned away and where every non-finite stretch
  begins and ends is exact.

So between two kept rows of the same finiteness every step had that finiteness: the
non-finite steps of the whole run can be told from the rows (``nonfinite_stretches``).

Should a run change finiteness so often that those rows alone pass half the capacity,
they are thinned too (every other one, first and newest kept) and ``exact_finiteness``
turns False: the series stays bounded, and says it no longer tells every change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

_FIRST_ROWS = 1024


class StepSeries:
    """Rows of (step, K float64 values), steps increasing; see the module for what is kept.

    ``width``: K. ``capacity``: the most rows kept (None: every step; at least 8).
    """

    def __init__(self, width: int, capacity: int | None = None) -> None:
        if capacity is not None and capacity < 8:
            raise ValueError(f"capacity must be at least 8 rows, got {capacity}")
        self.width = width
        self.capacity = capacity
        self.interval = 1
        self.exact_finiteness = True
        rows = _FIRST_ROWS if capacity is None else min(_FIRST_ROWS, capacity + 1)
        self._steps = np.empty(rows, dtype=np.int64)
        self._values = np.empty((width, rows), dtype=np.float64)
        self._pinned = np.empty(rows, dtype=bool)
        self._size = 0
        self._pattern: tuple[bool, ...] | None = None  # finiteness of the newest row

    def __len__(self) -> int:
        return self._size

    @property
    def every_step(self) -> bool:
        """Whether every step appended is still kept (nothing thinned yet)."""
        return self.interval == 1 and self.exact_finiteness

    @property
    def last_step(self) -> int | None:
        return int(self._steps[self._size - 1]) if self._size else None

    def append(self, step: int, values: Sequence[float]) -> None:
        """Add ``step`` (greater than the last) with its K ``values``."""
        pattern = tuple(math.isfinite(v) for v in values)
        changed = pattern != self._pattern
        self._pattern = pattern
        last = self._size - 1
        if last >= 0:
            if changed:
                self._pinned[last] = True  # the last step before the change
            elif not self._pinned[last] and self._steps[last] % self.interval:
                self._size = last  # kept only while it was the newest
        self._grow_if_full()
        k = self._size
        self._steps[k] = step
        self._values[:, k] = values
        self._pinned[k] = changed  # the first step, or the first after a change
        self._size = k + 1
        if self.capacity is not None and self._size > self.capacity:
            self._thin()

    def _grow_if_full(self) -> None:
        if self._size < len(self._steps):
            return
        rows = 2 * len(self._steps)
        if self.capacity is not None:
            rows = min(rows, self.capacity + 1)
        self._steps = _resized(self._steps, rows)
        self._values = np.concatenate(
            [self._values, np.empty((self.width, rows - self._values.shape[1]))], axis=1
        )
        self._pinned = _resized(self._pinned, rows)

    def _thin(self) -> None:
        """Double the interval until the rows fit in three quarters of the capacity (room
        to grow before the next thinning); while the pinned rows alone are over half the
        capacity, let every other one go instead."""
        target = self.capacity * 3 // 4
        while self._size > target:
            pinned = np.flatnonzero(self._pinned[: self._size])
            if len(pinned) > self.capacity // 2:
                self._pinned[pinned[1::2]] = False  # the first step stays pinned
                self.exact_finiteness = False
            else:
                self.interval *= 2
            keep = self._steps[: self._size] % self.interval == 0
            keep |= self._pinned[: self._size]
            keep[-1] = True  # the newest step
            self._compact(keep)

    def _compact(self, keep: np.ndarray) -> None:
        rows = np.flatnonzero(keep)
        n = len(rows)
        self._steps[:n] = self._steps[rows]
        self._values[:, :n] = self._values[:, rows]
        self._pinned[:n] = self._pinned[rows]
        self._size = n

    @property
    def steps(self) -> np.ndarray:
        """(S,) int64 copy: the kept steps, increasing."""
        return self._steps[: self._size].copy()

    @property
    def values(self) -> np.ndarray:
        """(K, S) float64 copy: column s holds the values of ``steps[s]``."""
        return self._values[:, : self._size].copy()

    def column(self, index: int) -> np.ndarray:
        """(S,) float64 copy of value ``index`` of every kept row."""
        return self._values[index, : self._size].copy()


def _resized(array: np.ndarray, rows: int) -> np.ndarray:
    out = np.empty(rows, dtype=array.dtype)
    out[: len(array)] = array
    return out


def nonfinite_stretches(steps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(R, 2) int64 [first, last] steps of each stretch of non-finite ``values`` (S,) kept
    at ``steps`` (S,): rows of a StepSeries (consecutive non-finite rows are one stretch,
    every step between them non-finite), or a per-step history with ``steps`` 0..S-1."""
    bad = ~np.isfinite(np.asarray(values, dtype=np.float64))
    if not bad.any():
        return np.zeros((0, 2), dtype=np.int64)
    edges = np.diff(np.concatenate(([0], bad.view(np.int8), [0])))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1) - 1
    steps = np.asarray(steps, dtype=np.int64)
    return np.stack([steps[starts], steps[ends]], axis=1)
