"""``gradviz gui RECORDING --screenshot shot.png``: save the window once the recording has
been read and shown, ``run_for`` seconds later (a recording still written goes on growing
meanwhile), then quit."""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, QTimer, Slot
from PySide6.QtWidgets import QApplication, QMainWindow

from gradviz.gui.pages.recordings.opening import Recordings
from gradviz.gui.shell.window_line import screenshot_line

#: Longest wait for the first read of the recording (s).
READ_TIMEOUT_S = 120.0


class RecordingScreenshot(QObject):
    def __init__(
        self, recordings: Recordings, window: QMainWindow, path: str, run_for: float
    ) -> None:
        super().__init__()
        self.window, self.path, self.run_for = window, path, run_for
        self.session = recordings.session
        self.exit_code = 1
        self._timing = False
        recordings.shown.connect(self._on_shown)
        recordings.failed.connect(self._on_failed)
        QTimer.singleShot(int(READ_TIMEOUT_S * 1000), self._on_timeout)

    @Slot(object)
    def _on_shown(self, _data: object) -> None:
        if not self._timing:
            self._timing = True
            QTimer.singleShot(int(self.run_for * 1000), self._capture)

    @Slot()
    def _capture(self) -> None:
        image = self.window.grab()
        line = screenshot_line(self.path, image.width(), image.height(), self.window, self.session)
        if image.save(self.path):
            print(line, flush=True)  # one line a script can read (see window_line)
            self.exit_code = 0
        else:
            print(f"gradviz gui: error: could not write {self.path!r}.", file=sys.stderr)
        QApplication.instance().quit()

    @Slot(str, str)
    def _on_failed(self, sentence: str, _details: str) -> None:
        print(f"gradviz gui: error: {sentence}", file=sys.stderr)
        QApplication.instance().quit()

    @Slot()
    def _on_timeout(self) -> None:
        if not self._timing:
            self._on_failed("the recording could not be read in time.", "")
