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

import numpy as np
from PySide6.QtCore import QObject, Slot

from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.settings.config import FitConfig
from gradviz.core.settings.drawn import is_drawn
from gradviz.core.settings.table import FILE_PREFIX, settings_of
from gradviz.gui.run.session import RunSession
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


#: Settings a legend label names at most (the tooltip has them all).
LABEL_SETTINGS = 2
_NAMED = ("target", "n", "dim", "method", "net", "optimizer", "seed", "init", "lr", "dtype")


def run_label(config: FitConfig, steps: int, current: FitConfig | None = None) -> str:
    """The legend's words for an earlier run: the settings in which it differs from the
    ``current`` run (as name=value, as in a line of settings), and its steps; without a
    current run, its method, point set and coordinates."""
    done = f"({steps:,} step{'s' if steps != 1 else ''})"
    if current is None:
        words = [f"method={config.method}", f"target={target_words(config.target)}"]
    else:
        words = [
            f"{name}={_value_words(name, getattr(config, name))}"
            for name in _NAMED
            if getattr(config, name) != getattr(current, name)
        ]
    if not words:
        return f"earlier: same setup {done}"
    shown = ", ".join(words[:LABEL_SETTINGS]) + (", …" if len(words) > LABEL_SETTINGS else "")
    return f"earlier: {shown} {done}"


def _value_words(name: str, value: object) -> str:
    if name in ("target", "init"):
        return target_words(str(value))
    if name == "net":
        return str(value) if value else "free"
    return f"{value:g}" if isinstance(value, float) else str(value)


def run_details(config: FitConfig, steps: int) -> str:
    """The tooltip of an earlier run: every setting it ran with (name=value)."""
    words = [
        f"{row.name}={_value_words(row.name, getattr(config, row.name))}"
        for row in settings_of(type(config))
    ]
    half = (len(words) + 1) // 2
    return (
        f"An earlier run ({steps:,} step{'s' if steps != 1 else ''}), kept in memory only:\n"
        + "; ".join(words[:half])
        + "\n"
        + "; ".join(words[half:])
    )


class EarlierRuns(QObject):
    """Keeps the last ``KEPT`` runs of ``session`` and draws them on ``loss`` (see module)."""

    def __init__(self, session: RunSession, loss: LossView, parent: QObject | None = None):
        super().__init__(parent)
        self.session, self.loss = session, loss
        self._kept: deque[tuple[np.ndarray, FitConfig]] = deque(maxlen=KEPT)  # losses
        self.runs: list[EarlierRun] = []  # as drawn, newest first
        self._labelled_for: int | None = None  # the run the labels compare with
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
        if self._kept and self._labelled_for != snapshot.generation:
            self._labelled_for = snapshot.generation
            self._draw(session.settings_now)  # named by how they differ from this run
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
        self._kept.appendleft((snapshot.loss_history, config))
        self._labelled_for = None
        self._draw(None)  # the next run's settings are not known yet

    def _draw(self, current: FitConfig | None) -> None:
        self.runs = [
            EarlierRun(losses, run_label(config, len(losses), current),
                       run_details(config, len(losses)))
            for losses, config in self._kept
        ]  # fmt: skip
        self.loss.earlier.show_runs(self.runs)
