"""The lab's investigation tools: side by side, "Why NaN here?" with Diagnose, and About.

``Investigations`` hangs off the FitController: it connects the window's ``compare``,
``why_nan`` and ``about`` actions, owns the comparison window and the Diagnose worker, and
joins their threads on shutdown. Diagnose pauses every other run first (anomaly mode is
process-wide: a NaN in a run stepping meanwhile would raise inside that run), holds the
Jacobian explorer's computations (a NaN in its backward passes would raise there, and they
would run slowly under anomaly mode's checks), and resumes both when it is done.
"""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

from gradviz.gui.about_dialog import AboutDialog
from gradviz.gui.compare.window import CompareWindow
from gradviz.gui.diagnose import DiagnoseWorker, WhyNanPanel
from gradviz.gui.lab.worker import WorkerHandle

log = logging.getLogger(__name__)


class Investigations(QObject):
    """Compare, Why NaN / Diagnose and About for one FitController (GUI thread only)."""

    def __init__(self, controller: Any) -> None:
        super().__init__()
        self.controller = controller
        self.compare_window: CompareWindow | None = None
        self.why_nan: WhyNanPanel | None = None
        self.about_dialog: AboutDialog | None = None
        self.diagnose_handle: WorkerHandle | None = None
        self._resume_lab = False
        self._resume_sides: list = []
        a = controller.window.actions
        a["compare"].triggered.connect(self.open_compare)
        a["why_nan"].triggered.connect(self.open_why_nan)

    # ---- side by side ----------------------------------------------------------------------
    @Slot()
    def open_compare(self) -> CompareWindow:
        if self.compare_window is None:
            self.compare_window = CompareWindow(self.controller.form.config)
            self.compare_window.failed.connect(self._on_failed)
        _bring_up(self.compare_window)
        return self.compare_window

    @Slot(str, str)
    def _on_failed(self, sentence: str, details: str) -> None:
        self.controller.show_error(sentence, details)

    # ---- why NaN and diagnose --------------------------------------------------------------
    @Slot()
    def open_why_nan(self) -> WhyNanPanel | None:
        """Show the pinned first-NaN snapshot in the lab and explain it beside it."""
        c = self.controller
        if c.pinned_nan is None:
            return None
        c.show_first_nan()
        if self.why_nan is None:
            self.why_nan = WhyNanPanel(c.views.select_pair, c.window)
            self.why_nan.diagnoseRequested.connect(self.diagnose)
        self.why_nan.show_snapshot(c.pinned_nan)
        _bring_up(self.why_nan)
        return self.why_nan

    def pinned_changed(self) -> None:
        """The pinned snapshot was replaced (by the exact replay): explain the new one."""
        c = self.controller
        if self.why_nan is not None and self.why_nan.isVisible() and c.pinned_nan is not None:
            self.why_nan.show_snapshot(c.pinned_nan)

    @Slot()
    def diagnose(self) -> None:
        """Re-run the pinned run's first non-finite step under anomaly mode, off the GUI
        thread, with every other run paused until it is done."""
        c = self.controller
        config = getattr(c, "run_config", None)
        if self.diagnose_handle is not None or config is None or self.why_nan is None:
            return
        self._resume_lab = c.state == "running"
        c.pause()
        self._resume_sides = (
            self.compare_window.pause_running() if self.compare_window is not None else []
        )
        others = c.pool.workers()
        if self.compare_window is not None:
            others += self.compare_window.workers()
        others.append(c.window.explorer.hold_computations())
        worker = DiagnoseWorker(config, others)
        worker.done.connect(self._on_diagnosed)
        worker.failed.connect(self._on_diagnose_failed)
        worker.finished.connect(self._on_diagnose_finished)
        self.diagnose_handle = WorkerHandle(worker, name="gradviz-diagnose")
        self.why_nan.set_diagnosing(paused=int(self._resume_lab) + len(self._resume_sides))
        self._set_runs_enabled(False)
        self.diagnose_handle.start()

    @Slot(object)
    def _on_diagnosed(self, report: object) -> None:
        if self.why_nan is not None:
            self.why_nan.show_report(report)

    @Slot(str, str)
    def _on_diagnose_failed(self, sentence: str, details: str) -> None:
        log.error("diagnose failed: %s\n%s", sentence, details)
        if self.why_nan is not None:
            self.why_nan.show_failure(sentence)

    @Slot()
    def _on_diagnose_finished(self) -> None:
        handle, self.diagnose_handle = self.diagnose_handle, None
        if handle is None:
            return
        handle.thread.wait()  # its work has returned: the join is immediate
        handle.worker.deleteLater()
        handle.thread.deleteLater()
        handle.deleteLater()
        self._set_runs_enabled(True)
        c = self.controller
        c.window.explorer.release_computations()
        if self._resume_lab and c.state == "paused":
            pinned_on_screen = c.viewing_pinned
            c.start()  # which follows the run again: keep the pinned snapshot on screen
            if pinned_on_screen:
                c.show_first_nan()
        for side in self._resume_sides:
            side.resume()
        self._resume_lab, self._resume_sides = False, []

    def _set_runs_enabled(self, enabled: bool) -> None:
        """No run may step while Diagnose holds anomaly mode: the lab's run actions and the
        comparison's Start follow ``diagnosing``."""
        self.controller._update_actions()
        if self.compare_window is not None:
            self.compare_window.start_button.setEnabled(enabled)

    @property
    def diagnosing(self) -> bool:
        return self.diagnose_handle is not None

    # ---- about -----------------------------------------------------------------------------
    @Slot()
    def show_about(self) -> AboutDialog:
        if self.about_dialog is not None:
            self.about_dialog.close()
            self.about_dialog.deleteLater()
        self.about_dialog = AboutDialog(self.controller.log_path, self.controller.window)
        self.about_dialog.open()
        return self.about_dialog

    # ---- closing ---------------------------------------------------------------------------
    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the diagnosis and both compared runs, and join their threads."""
        handle, self.diagnose_handle = self.diagnose_handle, None
        if handle is not None and not handle.stop_and_join(timeout_s):
            log.error("the diagnose thread did not stop in time")
        if self.compare_window is not None:
            self.compare_window.shutdown(timeout_s)
            self.compare_window.close()
        for dialog in (self.why_nan, self.about_dialog):
            if dialog is not None:
                dialog.close()

    @property
    def thread_count(self) -> int:
        diagnose = 1 if self.diagnose_handle is not None else 0
        compared = self.compare_window.thread_count if self.compare_window is not None else 0
        return diagnose + compared


def _bring_up(window: QWidget) -> None:
    """Show a top-level window and bring it to the front (where the platform can)."""
    window.show()
    if QGuiApplication.platformName() != "offscreen":  # it warns that it cannot raise
        window.raise_()
        window.activateWindow()
