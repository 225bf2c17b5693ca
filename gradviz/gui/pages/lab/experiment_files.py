"""File > Open experiment, Save experiment, the recent-experiments menu and File > Examples
of the lab.

An experiment file is the setup form's settings as JSON (``gui.experiments``). Opening one
fills the form; the lab then resets to its step 0 (``opened``), so the run on screen is
always the one the form describes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QSettings, Signal, Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFileDialog, QMainWindow

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.experiment import load_experiment, save_experiment
from gradviz.gui.common.settings import RecentFiles
from gradviz.gui.widgets.settings_form import SetupForm

RECENT_EXPERIMENTS_KEY = "recent_files"
FILE_FILTER = "Experiments (*.json)"


class ExperimentFiles(QObject):
    """Reads experiment files into ``form`` and writes the form to them, keeping the
    window's recent-experiments menu; problems go to ``show_error``. ``opened`` follows
    each experiment put into the form."""

    opened = Signal()

    def __init__(
        self,
        window: QMainWindow,
        form: SetupForm,
        settings: QSettings,
        show_error: Callable[[str, str], Any],
    ) -> None:
        super().__init__(window)
        self.recent = RecentFiles(settings, RECENT_EXPERIMENTS_KEY)
        self.window = window
        self.form = form
        self.show_error = show_error
        window.actions["open"].triggered.connect(self._on_open_triggered)
        window.actions["save"].triggered.connect(self._on_save_triggered)
        window.actions["copy_experiment"].triggered.connect(self.copy_line)
        window.recentChosen.connect(self.open)
        window.set_recent_files(self.recent.read())
        from gradviz.gui.pages.lab.examples_menu import ExamplesMenu

        self.examples = ExamplesMenu(window, form, self.opened.emit)  # File > Examples

    @Slot(str)
    def open(self, path: str) -> None:
        """Fill the form from the experiment at ``path`` (or show why it cannot be read)."""
        try:
            config, live = load_experiment(path)
        except GradvizError as exc:
            dialog = self.show_error(str(exc), "")
            if hasattr(dialog, "setWindowTitle"):
                dialog.setWindowTitle("gradviz: the experiment file was not opened")
            return
        self.form.set_config(config, live)
        self.window.set_recent_files(self.recent.add(path))
        self.opened.emit()

    def save(self, path: str) -> bool:
        """Write the form's settings to ``path`` and say so in the status bar."""
        try:
            save_experiment(path, self.form.config(), self.form.live_settings())
        except GradvizError as exc:
            self.show_error(str(exc), "")
            return False
        self.window.set_recent_files(self.recent.add(path))
        self.window.statusBar().showMessage(f"Saved the experiment to {path}", 8000)
        return True

    @Slot()
    def copy_line(self) -> str | None:
        """Put the form's setup on the clipboard in one line (``gradviz gui --experiment``
        reads it back); the line, or None where the form is not valid or cannot be written
        in one line (the dialog says why)."""
        from gradviz.core.settings.compact import to_compact

        try:
            line = to_compact(self.form.config(), self.form.live_settings())
        except GradvizError as exc:
            self.show_error(str(exc), "")
            return None
        QGuiApplication.clipboard().setText(line)
        self.window.statusBar().showMessage(f"Copied: {line}", 8000)
        return line

    def _on_open_triggered(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Open experiment", "", FILE_FILTER)
        if path:
            self.open(path)

    def _on_save_triggered(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self.window, "Save experiment", "experiment.json", FILE_FILTER
        )
        if path:
            self.save(path)
