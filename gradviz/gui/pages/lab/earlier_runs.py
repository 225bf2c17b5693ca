"""The runs before the current one: their losses, kept in memory for the loss plot, and the
last good picture of the lab for when a new run fails before its first frame.

The lab restarts its run at every change of the setup. ``EarlierRuns`` follows the live
run's newest snapshot (what the session shows of its own generation); when that run gives
way to another (a reset, a restart, a new run after Stop) it keeps the run's loss history
and settings, the last ``KEPT`` of them, and draws them faint on the loss plot. Nothing is
written to disk. Its memory: one float64 per step taken for each kept run, and the last
frame of the run before until the new run shows its first (``last_good``).
"""

from __future__ import annotations

import os
from collections import deque

from PySide6.QtCore import QObject, Slot

from gradviz.core.common.errors import GradvizError
from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.settings.config import FitConfig
from gradviz.core.settings.drawn import is_drawn
from gradviz.core.settings.table import FILE_PREFIX
from gradviz.gui.pages.lab.session import RunSession
from gradviz.gui.widgets.loss import LossView
from gradviz.gui.widgets.loss_earlier import EarlierRun

#: Earlier runs drawn on the loss plot.
KEPT = 3


def target_words(spec: str) -> str:
    """A point set in a few words: its generator, its file's name, or its drawn points."""
    if spec.startswith(FILE_PREFIX):
        return f"file {os.path.basename(spec[len(FILE_PREFIX) :])}"
    if is_drawn(spec):
        return "drawn points"
    return spec


def run_label(config: FitConfig, steps: int) -> str:
    """The legend's words for an earlier run: what tells runs apart, and its steps."""
    coords = f"net {config.net}" if config.net else "free coords"
    return (
        f"earlier: {config.method}, {target_words(config.target)} N={config.n}, "
        f"{coords}, {config.optimizer} ({steps:,} steps)"
    )


def run_details(config: FitConfig, steps: int) -> str:
    """The tooltip of an earlier run: every setting it ran with, as a line of settings."""
    from gradviz.core.settings.compact import to_compact

    try:
        line = to_compact(config)
    except GradvizError:
        line = ", ".join(f"{name}={value}" for name, value in config.to_dict().items())
    return f"An earlier run ({steps:,} steps), kept in memory only:\n{line}"


class EarlierRuns(QObject):
    """Keeps the last ``KEPT`` runs of ``session`` and draws them on ``loss`` (see module)."""

    def __init__(self, session: RunSession, loss: LossView, parent: QObject | None = None):
        super().__init__(parent)
        self.session, self.loss = session, loss
        self.runs: deque[EarlierRun] = deque(maxlen=KEPT)
        self._followed: tuple[Snapshot, FitConfig] | None = None  # the live run's newest
        # The newest frame of the run that gave way, until the next run shows its own.
        self.last_good: Snapshot | None = None
        self._last_config: FitConfig | None = None  # the settings that run ran with
        session.snapshotShown.connect(self._on_shown)
        session.cleared.connect(self._keep_followed)

    def config_of(self, snapshot: Snapshot) -> FitConfig | None:
        """The settings of the run before, for its last frame (None for any other)."""
        return self._last_config if snapshot is self.last_good else None

    @Slot(object)
    def _on_shown(self, snapshot: Snapshot) -> None:
        session = self.session
        if snapshot.generation != session.generation or session.settings_now is None:
            return  # a recording, or a frame of another run
        followed = self._followed
        if followed is not None and followed[0].generation != snapshot.generation:
            self._keep_followed()  # a new run began without a reset (Start after Stop)
        # The new run is on screen: the run before is no longer needed to fall back on
        # (its N x N pictures are freed with it).
        self.last_good = self._last_config = None
        latest = session.latest if session.latest is not None else snapshot
        if latest.generation == snapshot.generation:
            self._followed = (latest, session.settings_now)

    @Slot()
    def _keep_followed(self) -> None:
        """The run followed gives way to another: keep it if it took a step."""
        followed, self._followed = self._followed, None
        if followed is None:
            return
        snapshot, config = followed
        self.last_good, self._last_config = snapshot, config
        steps = len(snapshot.loss_history)
        if not steps:
            return  # step 0 only: no curve to compare with
        label, details = run_label(config, steps), run_details(config, steps)
        self.runs.appendleft(EarlierRun(snapshot.loss_history, label, details))
        self.loss.earlier.show_runs(list(self.runs))
