"""What a run session shows, as bookkeeping (no Qt): the run's newest snapshot, the one on
screen, and the pinned first NaN; the rules that choose between them are here, the
session turns their outcome into signals."""

from __future__ import annotations

from gradviz.core.lab.snapshot import Snapshot
from gradviz.gui.run.first_nan import FirstNanPin


class OnScreen:
    """``latest``: the newest snapshot of the current run; ``shown``: the one on screen (the
    latest, the pinned first NaN, an older step chosen on the timeline, or another source's,
    such as a recording's); ``pin``: the first NaN pinned, and whether it is viewed."""

    def __init__(self) -> None:
        self.latest: Snapshot | None = None
        self.shown: Snapshot | None = None
        self.pin = FirstNanPin()

    def clear(self) -> None:
        """A new generation: nothing is on screen, nothing pinned."""
        self.latest = self.shown = None
        self.pin.clear()

    def viewing_older(self, generation: int) -> bool:
        """Showing an older step of the current run (``generation``) than its newest
        (chosen on the timeline), not the pinned first NaN."""
        shown, latest = self.shown, self.latest
        return (
            shown is not None
            and latest is not None
            and shown is not latest
            and shown.generation == generation
            and not self.pin.viewing
        )

    def view_pinned(self) -> Snapshot | None:
        """View the pinned first NaN (until ``leave_for_latest``): the snapshot to show, or
        None where nothing is pinned."""
        if self.pin.snapshot is not None:
            self.pin.viewing = True
        return self.pin.snapshot

    def leave_for_latest(self, generation: int) -> bool:
        """Leave the pinned first NaN, or an older step of the run (``generation``), for
        the newest; False where the screen was on neither."""
        if self.pin.viewing:
            self.pin.viewing = False
            return True
        return self.viewing_older(generation)

    def frame(self, snapshot: Snapshot, generation: int, stands_still: bool) -> tuple[bool, bool]:
        """A live frame of the current run (``generation``) arrived: it is the newest.
        Returns (pin it, show it). It is pinned where it is the first with a non-finite
        gradient; it is shown unless the pinned first NaN is viewed, or another source
        (a recording) is on screen while the run ``stands_still`` (paused or stopped): a
        late frame must not take the views back from it (resuming, starting or resetting
        the run brings its frames back)."""
        self.latest = snapshot
        other = self.shown is not None and self.shown.generation != generation
        return self.pin.wants(snapshot), not self.pin.viewing and not (other and stands_still)
