"""The step timeline under the views of a recording: scrub, play, follow, first non-finite.

``Timeline`` knows only a list of step numbers: ``set_steps(steps)``; it emits
``indexChanged(i)`` (the i-th recorded step is selected) and ``followClicked(bool)`` (the
user ticked or unticked Follow).
While following, new steps move the slider to the newest; moving the slider back (or
pausing) stops following. Arrow keys step one recorded step, Page Up/Down ten.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QSignalBlocker, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QWidget,
)

from gradviz.gui.widgets.steady import SteadyBox

#: The state of a recording still being written whose newest steps are not followed.
NOT_FOLLOWING = "new steps arriving · not following"
#: Playback speeds offered, in recorded steps per second.
SPEEDS = (1, 5, 10, 30, 100)
DEFAULT_SPEED = 10


class Timeline(QWidget):
    indexChanged = Signal(int)
    #: The user ticked (True) or unticked Follow (``set_following`` does not emit it).
    followClicked = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("timeline")
        self._steps = np.zeros(0, dtype=np.int64)
        self._following = False
        self._first_bad: int | None = None
        self._source_text, self._growing = "", False
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setObjectName("timeline-slider")
        self.slider.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.slider.setPageStep(10)
        self.slider.setToolTip("Recorded step on screen (arrow keys: one step)")
        self.slider.valueChanged.connect(self._on_value)
        self.step_label = QLabel("no steps")
        self.step_label.setMinimumWidth(150)
        self.play = QPushButton("Play")
        self.play.setCheckable(True)
        self.play.setToolTip("Play the recorded steps at the chosen speed")
        self.play.toggled.connect(self._on_play)
        self.play.setEnabled(False)  # until there are steps to play through
        self.speed = QComboBox()
        for s in SPEEDS:
            self.speed.addItem(f"{s} steps/s", s)
        self.speed.setCurrentIndex(SPEEDS.index(DEFAULT_SPEED))
        self.speed.currentIndexChanged.connect(self._on_speed)
        self.first_bad = QPushButton("First non-finite")
        self.first_bad.setToolTip("Go to the first recorded step with a NaN or Inf gradient")
        self.first_bad.setEnabled(False)
        self.first_bad.clicked.connect(self.go_to_first_bad)
        self.follow = QPushButton("Follow")
        self.follow.setCheckable(True)
        self.follow.setToolTip(
            "Show each new step as it arrives; untick to stay on the step shown (a live run "
            "pauses there)"
        )
        self.follow.toggled.connect(self._on_follow_toggled)
        self.state_label = QLabel("")
        self.state_label.setObjectName("timeline-state")
        self.state_label.setMinimumWidth(170)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 2)
        # The step and state readouts change every frame: in boxes (see SteadyBox).
        for w in (self.play, self.speed, self.slider, SteadyBox(self.step_label),
                  self.first_bad, self.follow, SteadyBox(self.state_label)):  # fmt: skip
            layout.addWidget(w, 1 if w is self.slider else 0)
        self._timer = QTimer(self)
        self._timer.timeout.connect(self._advance)
        self._on_speed()

    # ---- what it shows ---------------------------------------------------------------------
    @property
    def index(self) -> int:
        return self.slider.value()

    @property
    def step(self) -> int | None:
        """The selected step number, None before any step."""
        return int(self._steps[self.index]) if len(self._steps) else None

    @property
    def following(self) -> bool:
        return self._following

    def readouts(self) -> dict:
        """The step selected, as the label reads it, and the timeline's state."""
        return {
            "step": self.step,
            "index": self.index,
            "count": len(self._steps),
            "label": self.step_label.text(),
            "following": self.following,
            "state": self.state_label.text(),
        }

    def set_steps(self, steps: np.ndarray) -> None:
        """The recorded step numbers (S,); keeps the selection, or moves to the newest step
        while following."""
        self._steps = np.asarray(steps, dtype=np.int64)
        with QSignalBlocker(self.slider):
            self.slider.setRange(0, max(len(self._steps) - 1, 0))
            if self._following and len(self._steps):
                self.slider.setValue(len(self._steps) - 1)
        playable = len(self._steps) > 1
        if not playable:
            self.play.setChecked(False)
        self.play.setEnabled(playable)
        self._label()
        self.indexChanged.emit(self.index)

    def set_first_bad_step(self, step: int | None) -> None:
        """The first step with a non-finite gradient (None: none)."""
        self._first_bad = step
        self.first_bad.setEnabled(step is not None)

    def set_state_text(self, text: str, growing: bool = False) -> None:
        """What the source says (``"following"``, ``"complete"``, ...); ``growing``: its
        writer may still add steps. Shown as it is, except that a growing source the user
        has scrubbed back from reads as not followed (it said "following" while the
        selection stayed put)."""
        self._source_text, self._growing = text, growing
        self._state_label()

    def _state_label(self) -> None:
        text = self._source_text
        if self._growing and not self._following:
            text = NOT_FOLLOWING
        self.state_label.setText(text)

    def set_followable(self, followable: bool) -> None:
        """Whether following makes sense (the writer may still add steps)."""
        self.follow.setEnabled(followable)
        if not followable:
            self.set_following(False)

    # ---- commands -------------------------------------------------------------------------
    def select_index(self, index: int) -> None:
        self.slider.setValue(int(np.clip(index, 0, self.slider.maximum())))

    def select_step(self, step: int) -> None:
        """Select the recorded step ``step`` (the last one at or before it)."""
        if len(self._steps):
            self.select_index(int(np.searchsorted(self._steps, step, side="right")) - 1)

    @Slot()
    def go_to_first_bad(self) -> None:
        if self._first_bad is not None:
            self.set_following(False)
            self.select_step(self._first_bad)

    @Slot(bool)
    def set_following(self, following: bool) -> None:
        if following == self._following:
            return
        self._following = following
        with QSignalBlocker(self.follow):
            self.follow.setChecked(following)
        self._state_label()
        if following and len(self._steps):
            self.slider.setValue(len(self._steps) - 1)

    # ---- slots ----------------------------------------------------------------------------
    @Slot(bool)
    def _on_follow_toggled(self, following: bool) -> None:
        # set_following changes the button with its signals blocked: this is the user's.
        self.set_following(following)
        self.followClicked.emit(following)

    @Slot(int)
    def _on_value(self, value: int) -> None:
        if self._following and value < self.slider.maximum():
            self.set_following(False)  # scrubbed back: stop following
        self._label()
        self.indexChanged.emit(value)

    @Slot(bool)
    def _on_play(self, playing: bool) -> None:
        self.play.setText("Pause" if playing else "Play")
        if playing:
            self.set_following(False)
            if self.index >= self.slider.maximum():
                self.slider.setValue(0)
            self._timer.start()
        else:
            self._timer.stop()

    @Slot()
    def _on_speed(self) -> None:
        self._timer.setInterval(max(int(1000 / self.speed.currentData()), 1))

    @Slot()
    def _advance(self) -> None:
        if self.index >= self.slider.maximum():
            self.play.setChecked(False)
        else:
            self.slider.setValue(self.index + 1)

    def _label(self) -> None:
        n = len(self._steps)
        self.step_label.setText(f"step {self.step}  ({self.index + 1}/{n})" if n else "no steps")
