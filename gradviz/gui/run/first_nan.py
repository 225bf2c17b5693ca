"""The run's first non-finite gradient, pinned: which snapshot, how exact, whether on screen.

``RunSession`` owns one ``FirstNanPin`` and turns its changes into signals; the pin itself
is plain bookkeeping (no Qt), so the rules below are in one place.
"""

from __future__ import annotations

import numpy as np

from gradviz.core.common.health import Health
from gradviz.core.lab.snapshot import Snapshot


def has_nonfinite_gradient(snapshot: Snapshot) -> bool:
    """Whether the gradients ``snapshot`` shows hold a NaN or an Inf (step 0 included,
    whose gradients no optimizer step has used yet)."""
    if snapshot.first_nonfinite_grad_step is not None:
        return True
    return bool(
        (np.asarray(snapshot.entry_health) >= Health.NEG_INF).any()
        or (np.asarray(snapshot.coord_health) >= Health.NEG_INF).any()
    )


class FirstNanPin:
    """The snapshot of a run's first non-finite gradient, and whether the screen shows it
    instead of the live frames (``viewing``, until the user goes back to live).

    The first live frame whose gradients hold a NaN or an Inf is pinned at once. It is
    approximate (the first NaN may fall between two frames) until the worker's replay of
    the exact step replaces it (``replayed``): only a replayed pin can have its cells read
    at full resolution, since the worker keeps that step's tensors.
    """

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None
        self.replayed = False
        self.viewing = False

    def clear(self) -> None:
        """Nothing pinned, nothing viewed (a new generation)."""
        self.snapshot = None
        self.replayed = self.viewing = False

    def pin(self, snapshot: Snapshot | None, replayed: bool = False) -> bool:
        """Pin ``snapshot`` (None: unpin), ``replayed`` when it is the worker's exact one;
        True when this changed which snapshot is pinned."""
        changed = snapshot is not self.snapshot
        if changed:
            self.snapshot = snapshot
            self.replayed = False
        self.replayed = self.replayed or replayed
        return changed

    def wants(self, snapshot: Snapshot) -> bool:
        """Whether a live ``snapshot`` is the first to show a non-finite gradient."""
        return self.snapshot is None and has_nonfinite_gradient(snapshot)

    def is_exact(self, snapshot: Snapshot) -> bool:
        """Whether ``snapshot`` is the pin and the worker replayed it (holds its tensors)."""
        return snapshot is self.snapshot and self.replayed

    def first_nonfinite_grad_step(self, latest: Snapshot | None) -> int | None:
        """The step (0-based, as the CLI counts) whose gradients were first non-finite, as
        of the run's ``latest`` snapshot: 0 when step 0's gradients already are, before
        any step has used them."""
        if latest is None:
            return None
        if latest.first_nonfinite_grad_step is not None:
            return latest.first_nonfinite_grad_step
        return 0 if self.snapshot is not None else None
