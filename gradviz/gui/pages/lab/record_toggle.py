"""Run > Record runs: each lab run started while it is on is written as a recording (the
format of ``gradviz fit --record``) into a folder chosen once, as ``run-<time>-<n>``.

The run is wrapped on its worker thread (``RecordedFitRun``: every step also goes to a
``FitRecording``), so the worker and the session are unchanged. A recording is closed, and
marked complete, on the GUI thread once its worker has finished: no step can race it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QMainWindow

from gradviz.core.settings.config import FitConfig
from gradviz.gui.pages.lab.run_menu import RunMenu
from gradviz.gui.run.session import RunSession
from gradviz.gui.run.worker import default_run_factory


class RecordedFitRun:
    """A core run whose every step is also recorded; everything else is the run's own."""

    def __init__(self, run: Any, path: str) -> None:
        from gradviz.core.record.fit_recording import FitRecording  # torch: worker thread

        self._run = run
        self.path = path
        self.recording = FitRecording(run, path)
        self.generation: int | None = None  # learnt from the worker's first snapshot
        self.closed = False

    def step(self, capture: bool = False) -> float:
        return self.recording.step(self._run, capture)

    def snapshot(self, generation: int | None = None):
        if generation is not None:
            self.generation = generation
        return self._run.snapshot(generation)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.recording.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._run, name)


class RecordToggle(QObject):
    """The Run menu's "Record runs" action and the recordings it makes (``made``)."""

    def __init__(self, window: QMainWindow, session: RunSession, run_menu: RunMenu) -> None:
        super().__init__(window)
        self.window = window
        self.session = session
        self.folder = ""
        self.made: list[str] = []
        #: Asks for the folder the recordings go into ('' cancels); a folder dialog.
        self.choose_folder: Callable[[], str] = self._choose_folder
        self._plain_factory = session.run_factory
        self._lock = threading.Lock()
        self._runs: list[RecordedFitRun] = []
        self._count = 0
        self.action = QAction("&Record runs…", window)
        self.action.setCheckable(True)
        self.action.setToolTip("Write each run started from now on as a recording")
        self.action.toggled.connect(self._on_toggled)
        run_menu.add_to_menu(self.action)
        session.workerRetired.connect(self._on_worker_retired)

    @Slot(bool)
    def _on_toggled(self, on: bool) -> None:
        if on and not self.folder:
            self.folder = self.choose_folder()
            if not self.folder:
                self.action.setChecked(False)
                return
        self.session.run_factory = self._recording_factory if on else self._plain_factory

    def _recording_factory(self, config: FitConfig) -> RecordedFitRun:
        """Build the run and its recording (on the worker thread)."""
        run = (self._plain_factory or default_run_factory)(config)
        with self._lock:
            self._count += 1
            name = f"run-{time.strftime('%Y%m%d-%H%M%S')}-{self._count}"
        recorded = RecordedFitRun(run, str(Path(self.folder) / name))
        with self._lock:
            self._runs.append(recorded)
            self.made.append(recorded.path)
        return recorded

    @Slot(int)
    def _on_worker_retired(self, _generation: int) -> None:
        """Close the recordings of runs whose worker has finished (the session no longer
        holds its thread)."""
        going = {w.generation for w in self.session.workers()}
        with self._lock:
            done = [r for r in self._runs if r.generation is not None and r.generation not in going]
            self._runs = [r for r in self._runs if r not in done]
        for recorded in done:
            recorded.close()

    def shutdown(self) -> None:
        """Close what is left (the workers have been joined)."""
        with self._lock:
            left, self._runs = self._runs, []
        for recorded in left:
            recorded.close()

    def _choose_folder(self) -> str:
        return QFileDialog.getExistingDirectory(self.window, "Record runs into folder")
