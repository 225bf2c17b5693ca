"""When a Recorder records a step: every ``interval``-th logged step and every step with a
non-finite gradient, within a budget of bytes per rank.

The interval starts at ``every`` and doubles each time the recording passes 1/2, 3/4, 7/8 ...
of its budget, so a long run keeps a record of its whole length; past the budget only the
run's first non-finite step is still recorded.
"""

from __future__ import annotations

from gradviz.core.common.errors import GradvizError


class Pacing:
    """``every`` (a whole number >= 1) and ``budget_bytes``; ``level``: how many times the
    interval has doubled."""

    def __init__(self, every: int, budget_bytes: int) -> None:
        if not (isinstance(every, int) and every >= 1):
            raise GradvizError(f"every must be a whole number >= 1, got {every!r}.")
        self.every = every
        self.budget_bytes = int(budget_bytes)
        self.level = 0
        self._seen_bad = False

    @property
    def interval(self) -> int:
        """The current recording interval: ``every`` doubled once per budget threshold."""
        return self.every << self.level

    def at_interval(self, count: int) -> bool:
        """Whether the ``count``-th logged step (from 0) falls on the interval."""
        return count % self.interval == 0

    def within_budget(self, written: int) -> bool:
        return written < self.budget_bytes

    def adjust(self, written: int) -> None:
        """Double the interval for each threshold ``written`` bytes have passed."""
        while written >= self.budget_bytes * (1 - 0.5 ** (self.level + 1)):
            self.level += 1
            if self.level > 60:
                break

    def wants(self, bad_now: bool, count: int, written: int) -> bool:
        """Record the ``count``-th logged step? Every interval-th step and every non-finite
        one (``bad_now``) within the budget; the first non-finite step even beyond it."""
        first_bad = bad_now and not self._seen_bad
        self._seen_bad = self._seen_bad or bad_now
        if not self.within_budget(written):
            return first_bad
        return bad_now or self.at_interval(count)
