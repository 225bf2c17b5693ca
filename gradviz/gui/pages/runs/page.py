"""The Runs page: the overlay of runs (``RunsOverlay``), fed by the recordings opened and
by the lab's live run on request.

``health`` (the Model health page's object, which opens the recordings: ``shown``,
``choose_and_open``, ``showing_recordings``) gives the recordings read; every one read is
added to the overlay, which follows it itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, Slot

from gradviz.gui.pages.runs.overlay import RunsOverlay

#: The title of the dialog when the page cannot do what was asked.
RUNS_FAILED_TITLE = "gradviz: recordings"


class RunsPage(QObject):
    """``widget``/``overlay``: the page. Stays on screen when a recording is read."""

    def __init__(
        self, health: Any, session: Any, exports: Any, show_error: Callable[..., Any]
    ) -> None:
        super().__init__()
        self.session, self.show_error = session, show_error
        self.overlay = self.widget = RunsOverlay()
        self.overlay.addRecordingRequested.connect(health.choose_and_open)
        self.overlay.addLiveRequested.connect(self.add_live_run)
        health.shown.connect(self._on_recording_shown)
        health.showing_recordings.append(self)
        health.showing_lab_recordings.append(self)
        exports.add_plot("runs", self.overlay.plot)

    @Slot(object)
    def _on_recording_shown(self, data: Any) -> None:
        self.overlay.add_recording(data.path)  # followed by the overlay itself

    @Slot()
    def add_live_run(self) -> None:
        """Overlay the lab's current run; it grows as the run goes."""
        if self.session.latest is None:
            dialog = self.show_error("There is no live run to add yet: start one in the lab.", "")
            if hasattr(dialog, "setWindowTitle"):
                dialog.setWindowTitle(RUNS_FAILED_TITLE)
            return
        self.overlay.add_live(self.session)

    def arrays(self) -> dict[str, np.ndarray]:
        return self.overlay.arrays()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self.overlay.shutdown(timeout_s)
