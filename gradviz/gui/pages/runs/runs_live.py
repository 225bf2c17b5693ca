"""The lab's live run as a run of the Runs page: it grows with every snapshot shown.

A ``LiveFeed`` listens to the session's ``snapshotShown`` and, for snapshots of the run it
was made for (one generation), emits that run's ``RunSeries``: its whole loss history, step
k at x = k as the lab's loss plot draws it, and its gradient norms (all tensors, or one) of
the same steps. Each step's wall time is when the feed first saw it; the steps taken before
the feed started are dated back from the run's step rate.
"""

from __future__ import annotations

import time

import numpy as np
from PySide6.QtCore import QObject, Signal, Slot

from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.record.run_series import RunSeries, live_series
from gradviz.gui.run.session import RunSession


def live_label(snapshot: Snapshot) -> str:
    return f"live run {snapshot.generation} ({snapshot.method})"


class LiveFeed(QObject):
    """``loaded(RunSeries)`` each time the run gained steps; ``ended()`` once another run
    started (the series then stays as it was)."""

    loaded = Signal(object)
    ended = Signal()

    def __init__(self, session: RunSession, parent: QObject | None = None) -> None:
        super().__init__(parent)
        latest = session.latest
        if latest is None:
            raise ValueError("no live run")
        self.session = session
        self.generation = latest.generation
        self.label = live_label(latest)
        self.series: RunSeries | None = None
        self._times = np.zeros(0)
        #: The steps taken before the feed started: their wall times are dated back.
        self._estimated = 0
        self.following = True
        session.snapshotShown.connect(self._on_snapshot)
        session.cleared.connect(self._on_cleared)

    def start(self) -> None:
        """Emit what the run holds now."""
        self._take(self.session.latest)

    @Slot(object)
    def _on_snapshot(self, snapshot: Snapshot) -> None:
        if self.following and snapshot.generation == self.generation:
            self._take(snapshot)

    @Slot()
    def _on_cleared(self) -> None:
        if self.following and self.session.generation != self.generation:
            self.following = False
            self.ended.emit()

    def _take(self, snapshot: Snapshot | None) -> None:
        if snapshot is None or snapshot.generation != self.generation:
            return
        losses = np.asarray(snapshot.loss_history, dtype=np.float64)
        if self.series is not None and len(losses) == len(self._times):
            return  # nothing new (a repaint, a recorded step shown again)
        if not len(self._times) and len(losses) > 1:
            self._estimated = len(losses) - 1  # the last one is seen now
        self._times = _extend_times(self._times, len(losses), snapshot.steps_per_second)
        self.series = live_series(
            self.label,
            losses,
            self._times,
            snapshot.grad_norm_history,
            snapshot.grad_norm_names,
            estimated_times=self._estimated,
        )
        self.loaded.emit(self.series)


def _extend_times(times: np.ndarray, steps: int, steps_per_second: float) -> np.ndarray:
    """(steps,) Unix seconds: the known ``times``, then the new steps spread evenly up to
    now (a frame shows several steps at once: no staircase); a first call dates the steps
    already taken back at ``steps_per_second`` (now if unknown)."""
    now = time.time()
    if len(times) >= steps:
        return times[:steps]
    k = steps - len(times)
    if len(times):
        new = times[-1] + (now - times[-1]) * np.arange(1, k + 1) / k
    elif steps_per_second and steps_per_second > 0:
        new = now - (k - 1 - np.arange(k)) / steps_per_second
    else:
        new = np.full(k, now)
    return np.concatenate([times, new])
