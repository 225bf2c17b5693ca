"""Instant edits: a change of the setup restarts the lab's run in place, with no question.

A change of network, point set, method, N, D, seed or optimiser (any setting the settings
table marks as needing a fresh run), or an opened experiment, restarts the run at step 0
with the new settings at once; a run that was running goes on running. The run before
stays on the loss plot as a faint curve (``EarlierRuns``), and Edit > Undo (Ctrl+Z) and
Redo bring the setups back (``SetupHistory``). A restart that cannot be made (the form is
not valid, the run would not fit in memory) leaves the current run as it is; a new run that
fails before its first frame gives the views back to the last good run's newest frame and
the status bar says what failed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QAction, QKeySequence

from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.settings.config import FitConfig
from gradviz.gui.pages.lab.earlier_runs import EarlierRuns
from gradviz.gui.pages.lab.setup_history import SetupHistory, changed_titles
from gradviz.gui.run.session import RunSession, RunState
from gradviz.gui.widgets.settings_form import SetupForm

if TYPE_CHECKING:
    from PySide6.QtWidgets import QMainWindow as MainWindow  # the shell's window

    from gradviz.gui.pages.lab.experiment_files import ExperimentFiles
    from gradviz.gui.run.views import LabViews


class InstantEdits(QObject):
    """Restarts ``session`` at each change of ``form`` (see the module docstring).

    ``fitting_config()`` is the form's settings for a new run, or None after saying why
    they cannot run; ``source_config(snapshot)`` the settings of the source a snapshot
    belongs to (None where unknown): the setup a change leaves.
    """

    def __init__(
        self,
        session: RunSession,
        form: SetupForm,
        window: MainWindow,
        views: LabViews,
        experiments: ExperimentFiles,
        fitting_config: Callable[[], FitConfig | None],
        source_config: Callable[[Snapshot | None], FitConfig | None],
    ) -> None:
        super().__init__(window)
        self.session, self.form, self.window = session, form, window
        self.fitting_config, self.source_config = fitting_config, source_config
        self.history = SetupHistory()
        self.earlier = EarlierRuns(session, views.views["loss"].widget, self)
        self.undo_action = self._action("undo", QKeySequence.StandardKey.Undo, self.undo)
        self.redo_action = self._action("redo", QKeySequence.StandardKey.Redo, self.redo)
        first = window.edit_menu.actions()[0] if window.edit_menu.actions() else None
        window.edit_menu.insertActions(first, [self.undo_action, self.redo_action])
        window.edit_menu.insertSeparator(first)
        experiments.opened.connect(lambda: self.restart(force=True))
        session.failed.connect(self._on_failed)
        self._update_actions()

    def _action(self, name: str, keys: QKeySequence.StandardKey, slot: Callable) -> QAction:
        action = QAction(self.window)
        action.setShortcut(QKeySequence(keys))
        action.triggered.connect(slot)
        self.window.addAction(action)
        self.window.actions[name] = action
        return action

    # ---- restarting ---------------------------------------------------------------------------
    def restart(self, force: bool = False) -> bool:
        """Restart the run with the form's settings (the setup left can be undone); False
        where they cannot run (said already) or the run on screen has them already (one
        edit may say ``changed`` for several settings: the first restarts). ``force``:
        restart even with the same settings (an experiment opened again)."""
        config = self.fitting_config()
        if config is None:
            return False
        if not force and self._runs_already(config):
            return False
        left = self._setup_left()
        if left is not None and left != config:
            self.history.record(left)
        self._go(config)
        return True

    def _runs_already(self, config: FitConfig) -> bool:
        """The current run has ``config`` and is what the lab shows (or is about to)."""
        session = self.session
        shown = session.shown
        own = shown is None or shown.generation == session.generation
        return own and session.state is not RunState.FAILED and session.settings_now == config

    def _setup_left(self) -> FitConfig | None:
        """The setup of the source on screen (the form described it until the change)."""
        session = self.session
        shown = session.shown
        if shown is None or (shown.generation != session.generation and shown.generation > 0):
            return session.settings_now  # step 0 not drawn yet, or the last good frame
        return self.source_config(shown)

    def _go(self, config: FitConfig) -> None:
        session = self.session
        running = session.state is RunState.RUNNING
        session.reset(config)
        if running:
            session.start()  # the run goes on, from step 0 of the new setup
        self._update_actions()

    # ---- undo and redo ------------------------------------------------------------------------
    @Slot()
    def undo(self) -> None:
        """Back to the setup before the last change, restarting the run with it."""
        current = self._setup_now()
        previous = self.history.undo(current) if current is not None else None
        self._apply(previous)

    @Slot()
    def redo(self) -> None:
        """Forward to the setup last undone."""
        current = self._setup_now()
        following = self.history.redo(current) if current is not None else None
        self._apply(following)

    def _setup_now(self) -> FitConfig | None:
        return self._setup_left() or self.session.settings_now

    def _apply(self, config: FitConfig | None) -> None:
        if config is None:
            return
        self.form.set_config(config)
        fitting = self.fitting_config() if self.session.available else None
        if fitting is not None:
            self._go(fitting)
        self._update_actions()

    def _update_actions(self) -> None:
        now = self.session.settings_now
        for action, verb, target in (
            (self.undo_action, "Undo", self.history.next_undo),
            (self.redo_action, "Redo", self.history.next_redo),
        ):
            what = ", ".join(changed_titles(now, target)) if now and target else ""
            action.setText(f"&{verb} {what}".rstrip() if what else f"&{verb} setup change")
            tip = f"{verb}: back to the setup with these {what}" if what else f"Nothing to {verb}"
            action.setToolTip(f"{tip} ({action.shortcut().toString()})")
            action.setStatusTip(tip)
            action.setEnabled(target is not None)

    # ---- failures -----------------------------------------------------------------------------
    @Slot(str, str)
    def _on_failed(self, sentence: str, _details: str) -> None:
        """A new run failed before its first frame: the views get the last good frame back
        (a failure later in a run keeps that run's frames on screen by itself)."""
        last = self.earlier.last_good
        if self.session.shown is not None or last is None:
            return
        self.session.show(last)
        self.window.statusBar().showMessage(
            f"The new run failed: {sentence} The views show the run before it (step "
            f"{last.step:,}); Edit > Undo brings its setup back."
        )
