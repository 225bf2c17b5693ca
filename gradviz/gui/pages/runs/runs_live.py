"""The lab's live run as a run of the Runs page: it grows with every snapshot shown.

A ``LiveFeed`` listens to the session's ``snapshotShown`` and, for snapshots of the run it
was made for (one generation), emits that run's ``RunSeries``: its loss history, step k at
x = k as the lab's loss plot draws it, and its gradient norms (all tensors, or one) of the
same steps (every step, or a long run's kept ones: the snapshots carry a bounded history,
see core.step_series). Each step's wall time is when the feed first saw it; the steps taken
before the feed started are dated back from the run's step rate.
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
        self._steps = np.zeros(0, dtype=np.int64)  # the steps of _times
        self._times = np.zeros(0)
        self._last_step = -1
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
        steps = snapshot.loss_steps()
        last = int(steps[-1]) if len(steps) else -1
        if self.series is not None and last == self._last_step:
            return  # nothing new (a repaint, a recorded step shown again)
        if not len(self._times) and last > 0:
            self._estimated = last  # steps before the last one were not seen: dated back
        self._times = _times_of(self._steps, self._times, steps, snapshot.steps_per_second)
        self._steps, self._last_step = steps, last
        self.series = live_series(
            self.label,
            losses,
            self._times,
            snapshot.grad_norm_history,
            snapshot.grad_norm_names,
            estimated_times=self._estimated,
            steps=steps,
        )
        self.loaded.emit(self.series)


def _times_of(
    known_steps: np.ndarray, known: np.ndarray, steps: np.ndarray, steps_per_second: float
) -> np.ndarray:
    """(S,) Unix seconds of ``steps`` (increasing): the times already given to
    ``known_steps`` where they are among them, the newer steps spread evenly up to now (a
    frame shows several steps at once: no staircase); a first call dates the steps before the
    newest back at ``steps_per_second`` (now if unknown). A long run's history is thinned, so
    ``steps`` keeps some of ``known_steps`` and adds newer ones: bounded as it is."""
    now = time.time()
    steps = np.asarray(steps, dtype=np.float64)
    if not len(steps):
        return np.zeros(0)
    if len(known_steps):
        s0, t0 = float(known_steps[-1]), float(known[-1])
        times = np.interp(steps, known_steps, known)  # exact for the steps already timed
        newer = steps > s0
        if newer.any():
            span = steps[-1] - s0
            times[newer] = t0 + (now - t0) * (steps[newer] - s0) / span
        return times
    if steps_per_second and steps_per_second > 0:
        return now - (steps[-1] - steps) / steps_per_second
    return np.full(len(steps), now)
