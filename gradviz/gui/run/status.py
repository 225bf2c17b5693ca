"""The toolbar's run actions and the status bar, both drawn from a RunSession.

Neither keeps any state of its own: each redraws from the session whenever it signals, so
the toolbar, the status bar and the views can never disagree about the run.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel

from gradviz.core.common.health import Health
from gradviz.core.lab.snapshot import Snapshot
from gradviz.gui.common.readouts import number_in, step_in
from gradviz.gui.run.session import RunSession, RunState

FINITE_STYLE = "color: #1e7b34;"
NAN_STYLE = "color: #c0392b; font-weight: bold;"


def rate_text(steps_per_second: float) -> str:
    """The speed as "1,234 steps/s" or "2.5 steps/s"; empty when unknown."""
    if not math.isfinite(steps_per_second):
        return ""
    if steps_per_second >= 10:
        return f"{steps_per_second:,.0f} steps/s"
    return f"{steps_per_second:.1f} steps/s"


def loss_text(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else str(value)


def loss_label(snapshot: Snapshot) -> str:
    """The snapshot's loss, named for what it is: the loss computed in step k before its
    update (the CLI's per-step ``loss[k]``), or the loss after the last update (the CLI's
    ``final_loss``) once the run has ended."""
    history, loss = snapshot.loss_history, snapshot.loss
    if len(history) and (history[-1] == loss or (math.isnan(history[-1]) and math.isnan(loss))):
        return f"loss of step {int(snapshot.loss_steps()[-1]):,} = {loss_text(loss)}"
    if snapshot.step == 0:
        return f"loss of step 0 = {loss_text(loss)}"
    if snapshot.done:
        return f"final loss = {loss_text(loss)}"
    return f"loss now = {loss_text(loss)}"


def first_nonfinite_text(session: RunSession) -> str:
    """Where the shown run's gradients and loss first went non-finite, each named; empty
    when both are finite so far. Read from the snapshot on screen (a live step, a recorded
    one, the pinned first NaN), never from the lab's run when another source is shown. The
    step numbers are the CLI's (0-based step indices)."""
    shown = session.shown
    if shown is None:
        return ""
    # The lab's own run knows its first bad step from the pin (also past a scrubbed step).
    own_run = shown.generation == session.generation
    grad = session.first_nonfinite_grad_step if own_run else shown.first_nonfinite_grad_step
    loss = shown.first_nonfinite_loss_step
    parts = []
    if grad is not None:
        parts.append(f"NaN/Inf gradient first at step {grad}")
    if loss is not None:
        parts.append(f"non-finite loss first at step {loss}")
    if not parts and has_nonfinite_gradients(shown):
        parts.append("NaN/Inf gradients in this step")
    return " · ".join(parts)


#: Health codes that say a gradient is not finite.
_ALARMS = (int(Health.NAN), int(Health.POS_INF), int(Health.NEG_INF))


def has_nonfinite_gradients(snapshot: Snapshot) -> bool:
    """Whether the snapshot's own health codes hold a NaN or Inf gradient."""
    codes = [np.asarray(snapshot.entry_health), np.asarray(snapshot.coord_health)]
    if any(np.isin(c, _ALARMS).any() for c in codes if c.size):
        return True
    return any(int(code) in _ALARMS for _, code in snapshot.param_health)


def threads_tooltip(snapshot: Snapshot) -> str:
    """The torch CPU threads of the snapshot's run and why, as the speed's tooltip says it."""
    if not snapshot.threads:
        return "torch CPU threads: not known for this step (not one of the lab's runs)"
    return f"torch CPU threads: {snapshot.threads}"


def failure_text(session: RunSession) -> str:
    """ "run failed (out of memory)" or "run failed" for a failed run; empty otherwise.
    A failed run's gradients were never checked past the failure: not "finite"."""
    failure = session.failure
    if failure is None:
        return ""
    return "run failed (out of memory)" if "out of memory" in failure else "run failed"


#: The key that starts, pauses and resumes a run (the window's "toggle_run" action holds it).
RUN_KEY = "Space"


def name_run_action(action: QAction, text: str) -> None:
    """Name a run action that Space also triggers (Start, Pause or Resume): ``text`` on its
    toolbar button, and in the Run menu ``text`` with Space in the shortcut column (Space
    belongs to one action, the window's Start-or-pause, so it cannot be each one's own)."""
    action.setText(f"{text}\t{RUN_KEY}")
    action.setIconText(text)


class RunActions(QObject):
    """Enables, checks and names the run actions (start, pause, step, stop, reset, first
    NaN, live, why NaN) after the session's state."""

    def __init__(self, session: RunSession, actions: dict[str, QAction]) -> None:
        super().__init__(session)
        self.session = session
        self.actions = actions
        session.stateChanged.connect(self._on_session_changed)
        session.pinnedChanged.connect(self._on_session_changed)
        # Each frame: only what a shown step changes (an older step or the newest).
        session.snapshotShown.connect(self._on_snapshot_shown)
        self.update()

    @Slot(object)
    def _on_session_changed(self, _value: object) -> None:
        self.update()

    @Slot(object)
    def _on_snapshot_shown(self, _snapshot: object) -> None:
        self._update_live()

    def _update_live(self) -> None:
        s = self.session
        self.actions["live"].setEnabled(s.viewing_pinned or s.viewing_older)

    def update(self) -> None:
        a, s = self.actions, self.session
        state, ready = s.state, s.available
        a["start"].setEnabled(ready and state is not RunState.RUNNING)
        a["pause"].setEnabled(ready and state.going)
        name_run_action(a["pause"], "Resume" if state is RunState.PAUSED else "Pause")
        a["toggle_run"].setEnabled(ready)
        a["step"].setEnabled(ready)
        a["stop"].setEnabled(state.going)
        a["reset"].setEnabled(ready)
        a["first_nan"].setEnabled(s.pinned is not None and not s.viewing_pinned)
        self._update_live()
        a["why_nan"].setEnabled(s.pinned is not None)


class RunStatus(QObject):
    """Fills the status bar's labels (state, step, loss, speed, device, nan) from the
    session: the snapshot on screen, the run's state and speed, its first non-finite step."""

    def __init__(self, session: RunSession, labels: dict[str, QLabel]) -> None:
        super().__init__(session)
        self.session = session
        self.labels = labels
        session.stateChanged.connect(self._on_session_changed)
        session.snapshotShown.connect(self._on_session_changed)
        session.pinnedChanged.connect(self._on_session_changed)
        session.cleared.connect(self.update)
        self.update()

    @Slot(object)
    def _on_session_changed(self, _value: object) -> None:
        self.update()

    @Slot()
    def update(self) -> None:
        labels, s = self.labels, self.session
        labels["state"].setText("showing first NaN" if s.viewing_pinned else s.state.label)
        snap: Snapshot | None = s.shown
        if snap is None:
            for name in ("step", "loss", "speed", "device", "nan"):
                labels[name].setText("")
            for name in ("speed", "device"):
                labels[name].setToolTip("")
            set_style(labels["nan"], "")
            return
        labels["step"].setText(f"{snap.step:,} step{'' if snap.step == 1 else 's'} done")
        labels["loss"].setText(loss_label(snap))
        labels["speed"].setText(rate_text(s.steps_per_second))
        labels["device"].setText(f"{snap.device} · {snap.method}")
        threads = threads_tooltip(snap)
        for name in ("speed", "device"):
            if labels[name].toolTip() != threads:
                labels[name].setToolTip(threads)
        nonfinite = failure_text(s) or first_nonfinite_text(s)
        labels["nan"].setText(nonfinite or "gradients finite")
        set_style(labels["nan"], NAN_STYLE if nonfinite else FINITE_STYLE)

    def readouts(self) -> dict:
        """The status bar as it reads: each label's text, the numbers in them, and whether
        the verdict is drawn as an alarm."""
        texts = {name: label.text() for name, label in self.labels.items()}
        step = number_in(texts["step"]) if texts["step"] else None
        return {
            "texts": texts,
            "threads_tooltip": self.labels["speed"].toolTip(),
            "step": None if step is None else int(step),
            "steps_per_second": number_in(texts["speed"]) if texts["speed"] else None,
            "first_nonfinite_grad_step": step_in(texts["nan"]) if "gradient" in texts["nan"]
            else None,
            "alarm": self.labels["nan"].styleSheet() == NAN_STYLE,
        }  # fmt: skip


def set_style(label: QLabel, style: str) -> None:
    """Restyle only on a change: setStyleSheet repolishes the widget even for the same
    sheet, and the status is updated every frame."""
    if label.styleSheet() != style:
        label.setStyleSheet(style)
