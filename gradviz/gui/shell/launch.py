"""``gradviz gui MODEL_OR_RECORDING [--page P] [--screenshot F]``: the page to show once the
file is open, and the screenshot of a model file (a recording's is RecordingScreenshot's).

The page is shown when the file is on screen (opening a model brings the explorer forward,
reading a recording Model health), so ``--page`` wins over those.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, QTimer, Slot
from PySide6.QtWidgets import QApplication

#: Longest wait for a model file to be read, and its graph laid out (s).
OPEN_TIMEOUT_S = 120.0


class PageOnOpen(QObject):
    """Shows page ``name`` now and again once the file is on screen (and, for the Graph
    page, once its graph is drawn); ``ready`` is then True."""

    def __init__(self, controller, name: str) -> None:
        super().__init__(controller.window)
        self.controller, self.index = controller, controller.page_index(name)
        self.wants_graph = name == "graph"
        self.ready = False
        # Once the window shows: a page shown before hides no docks (none is visible yet).
        QTimer.singleShot(0, self._show)
        controller.recordings.shown.connect(self._on_open)
        controller.models.opener.modelShown.connect(self._on_open)
        controller.graph.page.laidOut.connect(self._on_laid_out)

    @Slot()
    def _show(self) -> None:
        self.controller.window.pages.show_page(self.index)

    @Slot(object)
    def _on_open(self, _what: object) -> None:
        self.controller.window.pages.show_page(self.index)
        self.ready = self.ready or not self.wants_graph

    @Slot()
    def _on_laid_out(self) -> None:
        if self.wants_graph:
            self.controller.window.pages.show_page(self.index)
            self.ready = True


class ModelScreenshot(QObject):
    """Saves the window ``run_for`` seconds after the model file is on screen (its graph
    drawn, where the Graph page is asked for), prints the window's line, quits."""

    def __init__(self, controller, path: str, run_for: float, page: PageOnOpen | None) -> None:
        super().__init__()
        self.controller, self.path, self.run_for, self.page = controller, path, run_for, page
        self.exit_code = 1
        self._timing = False
        opener = controller.models.opener
        opener.modelShown.connect(self._on_progress)
        controller.graph.page.laidOut.connect(self._on_progress)
        opener.stateChanged.connect(self._on_state)
        QTimer.singleShot(int(OPEN_TIMEOUT_S * 1000), self._on_timeout)

    @Slot()
    @Slot(object)
    def _on_progress(self, *_args) -> None:
        if self._timing or (self.page is not None and not self.page.ready):
            return
        self._timing = True
        QTimer.singleShot(int(self.run_for * 1000), self._capture)

    @Slot(object)
    def _on_state(self, state) -> None:
        from gradviz.gui.pages.models.open_model import OpenState

        if state in (OpenState.FAILED, OpenState.CANCELLED) and not self._timing:
            self._fail("the model file could not be opened.")

    @Slot()
    def _capture(self) -> None:
        from gradviz.gui.shell.window_line import screenshot_line

        window = self.controller.window
        image = window.grab()
        line = screenshot_line(
            self.path, image.width(), image.height(), window, self.controller.session
        )
        if image.save(self.path):
            print(line, flush=True)
            self.exit_code = 0
        else:
            print(f"gradviz gui: error: could not write {self.path!r}.", file=sys.stderr)
        QApplication.instance().quit()

    def _fail(self, sentence: str) -> None:
        print(f"gradviz gui: error: {sentence}", file=sys.stderr)
        self.exit_code = 2
        QApplication.instance().quit()

    @Slot()
    def _on_timeout(self) -> None:
        if not self._timing:
            self._fail("the model file could not be opened in time.")
