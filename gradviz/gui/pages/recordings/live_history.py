"""The live run's in-memory history, on the same timeline as a recording.

Snapshots of the current run are kept every ``interval``-th step, and the history is
bounded the way a recording is: at most ``MAX_SNAPSHOTS`` snapshots and at most
``BUDGET_BYTES`` of arrays; when either is reached every other snapshot is dropped and
the interval doubles (so the history always spans the whole run, ever more thinly).
Scrubbing back while the run goes pauses it; Start resumes from the newest step.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from PySide6.QtCore import QObject, QSignalBlocker, Slot

from gradviz.core.lab.snapshot import Snapshot
from gradviz.gui.run.session import RunSession, RunState
from gradviz.gui.widgets.timeline import Timeline

#: What the timeline's state says while it shows the live run.
LIVE_RUN_LABEL = "live run"
#: Snapshots kept at most (as a lab recording's matrix snapshots).
MAX_SNAPSHOTS = 200
#: Bytes of snapshot arrays kept at most (an N = 1000 run keeps about 20 snapshots).
BUDGET_BYTES = 512 * 1024 * 1024


def snapshot_bytes(snapshot: Snapshot) -> int:
    """Bytes held by the snapshot's arrays."""
    total = 0
    for f in dataclasses.fields(snapshot):
        value = getattr(snapshot, f.name)
        if isinstance(value, np.ndarray):
            total += value.nbytes
    # The network's parameters and gradients (leading blocks) it keeps for the layer window.
    total += sum(p.values.nbytes + p.grads.nbytes for p in snapshot.param_values)
    return total


class LiveHistory:
    """Thinned snapshots of one run, oldest first."""

    def __init__(self, max_snapshots: int = MAX_SNAPSHOTS, budget_bytes: int = BUDGET_BYTES):
        self.max_snapshots = max_snapshots
        self.budget_bytes = budget_bytes
        self.snapshots: list[Snapshot] = []
        self.interval = 1

    def clear(self) -> None:
        self.snapshots = []
        self.interval = 1

    def add(self, snapshot: Snapshot, keep: bool = False) -> bool:
        """Keep ``snapshot`` if it is newer than the last one and on the interval (or
        ``keep``); True if kept (the snapshot of step 0 is always taken)."""
        last = self.snapshots[-1] if self.snapshots else None
        if last is not None and (
            snapshot.generation != last.generation or snapshot.step <= last.step
        ):
            if snapshot.generation == last.generation:
                return False
            self.clear()  # another run
        if self.snapshots and snapshot.step % self.interval and not keep:
            return False
        self.snapshots.append(snapshot)
        while len(self.snapshots) > 2 and self._over_budget():
            self.snapshots = self.snapshots[::2]
            self.interval *= 2
        return True

    def steps(self) -> np.ndarray:
        return np.array([s.step for s in self.snapshots], dtype=np.int64)

    def _over_budget(self) -> bool:
        per = snapshot_bytes(self.snapshots[-1])
        return (
            len(self.snapshots) > self.max_snapshots
            or per * len(self.snapshots) > self.budget_bytes
        )


class LiveTimeline(QObject):
    """Feeds ``timeline`` with the live run's history while ``active``."""

    def __init__(self, session: RunSession, timeline: Timeline, parent: QObject | None = None):
        super().__init__(parent)
        self.session = session
        self.timeline = timeline
        self.history = LiveHistory()
        self.active = False
        #: The user holds the views on a step (Follow unticked, an older step chosen):
        #: frames that arrive as the run pauses do not make the timeline follow again.
        self._held = False
        session.snapshotShown.connect(self._on_snapshot)
        session.cleared.connect(self._on_cleared)
        timeline.followClicked.connect(self._on_follow_clicked)

    def activate(self) -> None:
        """The timeline shows the live run (following it)."""
        self.active = True
        self._held = False
        self.show_state()
        self.timeline.set_first_bad_step(self.session.first_nonfinite_grad_step)
        self.timeline.set_following(True)
        self.timeline.set_steps(self.history.steps())

    def show_state(self) -> None:
        """The timeline says it shows the live run (after a recording's reading said more)."""
        self.timeline.set_state_text(LIVE_RUN_LABEL)
        self.timeline.set_followable(True)

    @Slot(object)
    def _on_snapshot(self, snapshot: Snapshot) -> None:
        """The timeline's cursor is on the live step shown: the pinned first NaN or a step
        scrubbed back to where one is shown; the newest step, followed, where that is shown
        (a new frame, Back to live view, a late frame after scrubbing back)."""
        if snapshot.generation != self.session.generation:
            return  # a recorded step, or a late one of an older run
        if self.active and self.session.viewing_pinned:
            self._point_at(snapshot)  # Show first NaN: the timeline says which step it is
            return
        newest = snapshot is self.session.latest
        if newest and self.session.state is RunState.RUNNING:
            self._held = False
        # Held (Follow unticked or an older step chosen, so the run paused): the frame the
        # run made as it paused is on screen, and it is kept so that the cursor can go to it.
        kept = self.history.add(snapshot, keep=newest and self._held)
        if not self.active:
            return
        if not newest:
            self._point_at(snapshot)  # a kept older step, chosen on the timeline
            return
        self.timeline.set_first_bad_step(self.session.first_nonfinite_grad_step)
        if not self._held:
            if kept or not self.timeline.following:
                self.timeline.set_following(True)
                self.timeline.set_steps(self.history.steps())
            return
        with QSignalBlocker(self.timeline):  # not back to the step the cursor was on
            self.timeline.set_steps(self.history.steps())
        self._point_at(snapshot)

    def follow(self) -> None:
        """Follow the run again, as ticking Follow does: its newest step on screen."""
        self.timeline.set_following(True)
        self._on_follow_clicked(True)

    @Slot(bool)
    def _on_follow_clicked(self, following: bool) -> None:
        """The timeline's cursor and the views stay on one step. Follow ticked: the newest
        step goes on screen (the cursor went to it). Unticked: the step on screen stays, so
        a going run pauses there, as it does when an older step is chosen."""
        if not self.active:
            return
        self._held = not following
        if following:
            self.session.show_live()
        elif self.session.state is RunState.RUNNING:
            self.session.pause()

    def _point_at(self, snapshot: Snapshot) -> None:
        """Put the timeline's cursor on ``snapshot``'s step without showing another one
        (the pinned first-NaN snapshot stays on screen)."""
        self.timeline.set_following(False)
        with QSignalBlocker(self.timeline):
            self.timeline.select_step(snapshot.step)

    @Slot()
    def _on_cleared(self) -> None:
        self.history.clear()
        self._held = False
        if self.active:
            self.timeline.set_steps(self.history.steps())

    def show_index(self, index: int) -> None:
        """The user selected the index-th kept snapshot: show it (pausing a going run)."""
        snapshots = self.history.snapshots
        if not self.active or not 0 <= index < len(snapshots) or self.timeline.following:
            return
        self._held = True
        if self.session.state is RunState.RUNNING:
            self.session.pause()
        if snapshots[index] is not self.session.shown:
            self.session.show(snapshots[index])
