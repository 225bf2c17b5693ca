"""The lab's investigation tools: side by side, and "Why NaN here?" with Diagnose.

``Investigations`` belongs to the lab: it connects the window's ``compare`` and
``why_nan`` actions, owns the comparison window and the Diagnose worker, and joins their
threads on shutdown. Diagnose pauses every other run first and holds the computations of
``holds`` (the Jacobian explorer's: the NaN tracer follows only its own thread, but its
module hooks are global and the replay competes with them for the CPU), and resumes both
when it is done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMainWindow, QWidget

from gradviz.core.settings.config import FitConfig
from gradviz.gui.common.background import BackgroundTasks
from gradviz.gui.pages.lab.diagnose import WhyNanPanel, diagnose_when_others_idle
from gradviz.gui.run.session import RunSession, RunState
from gradviz.gui.run.views import LabViews
from gradviz.gui.run.worker import describe_run_failure

log = logging.getLogger(__name__)


class Investigations(QObject):
    """Compare and Why NaN / Diagnose for the lab's session (GUI thread only).

    ``base_config()`` gives the lab's settings (the comparison's run A); ``show_error``
    is the app's error dialog; ``compare_window(base_config)`` makes the comparison's
    window (a ``CompareWindow``: ``sessions``, ``going``, ``thread_count``, ``failed``,
    ``shutdown``).
    """

    def __init__(
        self,
        session: RunSession,
        views: LabViews,
        window: QMainWindow,
        base_config: Callable[[], FitConfig],
        show_error: Callable[[str, str], object],
        compare_window: Callable[[Callable[[], FitConfig]], QWidget],
    ) -> None:
        super().__init__(session)
        self.session = session
        self.views = views
        self.window = window
        self.base_config = base_config
        self.show_error = show_error
        self.make_compare_window = compare_window
        self.compare_window: QWidget | None = None
        self.why_nan: WhyNanPanel | None = None
        #: What else computes while a diagnosis replays (``hold_computations()`` returns
        #: something to wait on until idle, ``release_computations()`` lets it go on).
        self.holds: list[Any] = []
        self._diagnosis = BackgroundTasks(self)
        self._diagnosis.succeeded.connect(self._on_diagnosed)
        self._diagnosis.failed.connect(self._on_diagnose_failed)
        self._diagnose_generation = 0
        self._diagnosing = False
        self._resume: list[RunSession] = []
        a = window.actions
        a["compare"].triggered.connect(self.open_compare)
        a["why_nan"].triggered.connect(self.open_why_nan)
        session.pinnedChanged.connect(self._on_pinned_changed)

    # ---- side by side ----------------------------------------------------------------------
    @Slot()
    def open_compare(self) -> Any:
        if self.compare_window is None:
            self.compare_window = self.make_compare_window(self.base_config)
            self.compare_window.failed.connect(self._on_failed)
        _bring_up(self.compare_window)
        return self.compare_window

    @property
    def comparing(self) -> bool:
        """Whether a compared run is going (closing the app would end it)."""
        return self.compare_window is not None and self.compare_window.going

    @Slot(str, str)
    def _on_failed(self, sentence: str, details: str) -> None:
        self.show_error(sentence, details)

    def _sessions(self) -> list[RunSession]:
        """Every run session: the lab's and the comparison's."""
        compared = list(self.compare_window.sessions) if self.compare_window is not None else []
        return [self.session, *compared]

    # ---- why NaN and diagnose --------------------------------------------------------------
    @Slot()
    def open_why_nan(self) -> WhyNanPanel | None:
        """Show the pinned first-NaN snapshot in the lab and explain it beside it."""
        pinned = self.session.pinned
        if pinned is None:
            return None
        self.session.show_first_nan()
        if self.why_nan is None:
            self.why_nan = WhyNanPanel(self.views.select_pair, self.window)
            self.why_nan.diagnoseRequested.connect(self.diagnose)
        self.why_nan.show_snapshot(pinned)
        _bring_up(self.why_nan)
        return self.why_nan

    @Slot(object)
    def _on_pinned_changed(self, pinned: object) -> None:
        """The pinned snapshot was replaced (by the exact replay): explain the new one."""
        if self.why_nan is not None and self.why_nan.isVisible() and pinned is not None:
            self.why_nan.show_snapshot(pinned)

    @Slot()
    def diagnose(self) -> None:
        """Re-run the pinned run's first non-finite step under the NaN tracer, off the GUI
        thread, with every other run paused until it is done."""
        config = self.session.config
        if self._diagnosing or config is None or self.why_nan is None:
            return
        sessions = self._sessions()
        self._resume = [s for s in sessions if s.state is RunState.RUNNING]
        others: list = []
        for session in sessions:
            session.pause()
            session.set_held(True)
            others += session.workers()
        others += [hold.hold_computations() for hold in self.holds]
        self._diagnose_generation += 1
        generation, tasks = self._diagnose_generation, self._diagnosis
        self._diagnosing = True
        self.why_nan.set_diagnosing(paused=len(self._resume))
        tasks.submit(
            generation,
            "diagnose",
            lambda: diagnose_when_others_idle(config, others, lambda: tasks.is_stale(generation)),
            describe_run_failure,
        )

    @Slot(int, str, object)
    def _on_diagnosed(self, _generation: int, _kind: str, report: object) -> None:
        if self.why_nan is not None:
            self.why_nan.show_report(report)
        self._end_diagnosis()

    @Slot(int, str, str, str)
    def _on_diagnose_failed(self, _gen: int, _kind: str, sentence: str, details: str) -> None:
        log.error("diagnose failed: %s\n%s", sentence, details)
        if self.why_nan is not None:
            self.why_nan.show_failure(sentence)
        self._end_diagnosis()

    def _end_diagnosis(self) -> None:
        """Release the held runs and the explorer; resume the runs that were going."""
        self._diagnosing = False
        for session in self._sessions():
            session.set_held(False)
        for hold in self.holds:
            hold.release_computations()
        for session in self._resume:
            pinned_on_screen = session.viewing_pinned
            session.start()  # resumes, and follows the run again: keep the pinned snapshot
            if pinned_on_screen:
                session.show_first_nan()
        self._resume = []

    @property
    def diagnosing(self) -> bool:
        return self._diagnosing

    # ---- closing ---------------------------------------------------------------------------
    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the diagnosis and both compared runs, and join their threads."""
        self._diagnosing = False
        self._diagnosis.shutdown(timeout_s)  # waits on past the timeout for a long step
        if self.compare_window is not None:
            self.compare_window.shutdown(timeout_s)
            self.compare_window.close()
        if self.why_nan is not None:
            self.why_nan.close()

    @property
    def thread_count(self) -> int:
        diagnose = self._diagnosis.running()
        compared = self.compare_window.thread_count if self.compare_window is not None else 0
        return diagnose + compared


def _bring_up(window: QWidget) -> None:
    """Show a top-level window and bring it to the front (where the platform can)."""
    window.show()
    if QGuiApplication.platformName() != "offscreen":  # it warns that it cannot raise
        window.raise_()
        window.activateWindow()
