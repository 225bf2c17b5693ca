"""The run of a trusted program while a model opens: its progress on the wait dialog and the
flag that Cancel sets to stop its process (gradviz.core.modelio.program_process).

A trusted TorchScript or .pt2 program loads and runs in a process of its own, so unlike a
``torch.load`` it can be stopped: Cancel sets the flag, and the load's thread stops the
process within a fraction of a second and ends with ProgramCancelled.
"""

from __future__ import annotations

import os
import threading
import time

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QProgressDialog

from gradviz.core.settings.program_limits import ProgramLimits, seconds_words

#: How often the wait dialog's seconds are updated.
TICK_MS = 500


class ProgramRun(QObject):
    """At most one load at a time: ``start`` gives the ProgramLimits to load with (their
    ``cancel`` flag new), ``stop`` sets the flag, ``finish`` forgets the load."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.cancel: threading.Event | None = None
        self.dialog: QProgressDialog | None = None
        self.label = ""
        self.started = 0.0
        self.timer = QTimer(self)
        self.timer.setInterval(TICK_MS)
        self.timer.timeout.connect(self._tick)

    def start(self, dialog: QProgressDialog | None, path: str, trusted: bool) -> ProgramLimits:
        """The limits for loading ``path``; where it is a trusted program, ``dialog`` counts
        the seconds its process has run."""
        self.stop()
        self.cancel = threading.Event()
        limits = ProgramLimits(cancel=self.cancel)
        self.dialog, self.started = (dialog if trusted else None), time.monotonic()
        self.label = (
            f"Running {os.path.basename(path)}'s program in a process of its own (each step "
            f"is stopped after {seconds_words(limits.time_limit)}; Cancel stops it now)"
        )
        if self.dialog is not None:
            self._tick()
            self.timer.start()
        return limits

    def stop(self) -> bool:
        """Stop the program's process, if a load is under way: whether there was one."""
        cancel = self.cancel
        self.finish()
        if cancel is None:
            return False
        cancel.set()
        return True

    def finish(self) -> None:
        """The load ended: no more seconds on the dialog, and its flag is forgotten (the
        loaded program keeps its process)."""
        self.timer.stop()
        self.dialog = None
        self.cancel = None

    def _tick(self) -> None:
        if self.dialog is not None:
            seconds = int(time.monotonic() - self.started)
            self.dialog.setLabelText(f"{self.label}: {seconds} s.")
