"""File > Open recording (also Recent, drag and drop, ``gradviz gui RECORDING``).

A lab recording (``gradviz fit --record``) opens in the lab's views with a timeline dock
under them; a ``watch`` recording opens in the Model health page. Reading and following
happen in a ``RecordingSource`` (off the GUI thread). A live run that starts takes the
views back.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, QSettings, Qt, Signal, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QFileDialog, QMainWindow, QSizePolicy

from gradviz.core.record.reader import is_recording
from gradviz.core.record.recording_data import RecordingData, damage_label, damage_line
from gradviz.gui.common.settings import RecentFiles, fill_recent_menu
from gradviz.gui.pages.recordings.health_page import ModelHealthPage
from gradviz.gui.pages.recordings.live_history import LiveTimeline
from gradviz.gui.run.follower import FollowState, RecordingSource
from gradviz.gui.run.recorded_run import RecordedRun, matrix_steps
from gradviz.gui.run.session import RunSession, RunState
from gradviz.gui.widgets.lazy import LazyWidget
from gradviz.gui.widgets.timeline import Timeline

RECENT_RECORDINGS_KEY = "recent_recordings"


#: The title of a dialog about a recording that could not be opened, or a Runs page action.
RECORDING_FAILED_TITLE = "gradviz: recordings"
#: The title of the question before a lab recording ends the run that is going.
STOP_RUN_TITLE = "Stop the run?"


def not_a_recording(path: str) -> str:
    """The sentence for a path that is not a recording."""
    return (
        f"{path!r} is not a gradviz recording: open a directory written by gradviz.watch "
        "or gradviz fit --record."
    )


class Recordings(QObject):
    """Opens recordings into ``window``: the Model health page, the lab's timeline dock.

    ``shown(RecordingData)`` is emitted each time a read recording has been put on screen;
    ``failed(sentence, details)`` when one could not be opened or read (after its dialog).
    """

    shown = Signal(object)
    failed = Signal(str, str)

    def __init__(
        self,
        window: QMainWindow,
        session: RunSession,
        settings: QSettings,
        show_error: Callable[[str, str], object],
        confirm: Callable[[str, str], bool],
        exports: Any,
    ) -> None:
        super().__init__(window)
        self.window, self.pages, self.session = window, window.pages, session
        self.show_error, self.confirm = show_error, confirm
        #: The window's exports (``add_plot(name, plot)``: a plot's right-click exports).
        self.exports = exports
        self._in_lab: RecordingSource | None = None  # the source the lab's views took last
        self.recent = RecentFiles(settings, RECENT_RECORDINGS_KEY)
        self.source: RecordingSource | None = None
        self.recorded = RecordedRun(self)
        # Recorded steps reach the views as live ones do: through the session.
        self.recorded.snapshotShown.connect(session.show)
        # Made when first painted or used (a recording opened, Graph asking for its step).
        self.health_page = LazyWidget(ModelHealthPage)
        self.health_page.built.connect(self._on_page_built)
        #: This page's content (the pages' stack shows it under ``PAGE_TITLE``).
        self.widget = self.health_page
        self.timeline = Timeline()
        self.timeline.indexChanged.connect(self._on_timeline_index)
        # Before the live timeline's own slot: it then points at the step shown.
        session.snapshotShown.connect(self._on_snapshot_shown)
        self.live = LiveTimeline(session, self.timeline, self)
        # One row high, whatever the window's height: at 1920 x 1080 the dock took a third
        # of the window, empty.
        self.timeline.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.dock = QDockWidget("Timeline", window)
        self.dock.setObjectName("dock-timeline")
        self.dock.setWidget(self.timeline)
        window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.dock)
        self.dock.hide()
        self.choose_path: Callable[[], str] = self._choose_path
        #: Pages that stay on screen when a recording is read (they show it too): the Runs
        #: page (every recording) and the Graph page (a model's).
        self.showing_recordings: list[object] = []
        #: Of those, the pages that stay when a lab recording opens into the lab's views.
        self.showing_lab_recordings: list[object] = []
        #: Other pages' timelines over the recording shown (the Graph page's): told its state
        #: (following, complete, damaged) as Model health's is, so none offers Follow alone.
        self.more_timelines: list[Timeline] = []
        self._make_menu()
        session.stateChanged.connect(self._on_run_state)

    @property
    def page_index(self) -> int:
        """The Model health page's index among the window's pages."""
        return self.pages.index_of(self)

    def _current_page(self) -> object | None:
        return self.pages.pages[self.pages.current()]

    @property
    def page(self) -> ModelHealthPage:
        """The Model health page (made on first use)."""
        return self.health_page.content

    @Slot(object)
    def _on_page_built(self, page: ModelHealthPage) -> None:
        page.rankChosen.connect(self._on_rank_chosen)
        self.exports.add_plot("health", page.health.plot)
        self.exports.add_plot("step_loss", page.loss.plot)
        self.exports.add_plot("histogram", page.histogram.plot)

    def _make_menu(self) -> None:
        self.open_action = QAction("Open r&ecording…", self.window)
        self.open_action.setShortcut(QKeySequence("Ctrl+Shift+O"))
        self.open_action.setToolTip("Open a recording (gradviz.watch or gradviz fit --record)")
        self.open_action.triggered.connect(self.choose_and_open)
        self.window.addAction(self.open_action)
        file_menu = self.window.file_menu
        first = self.window.actions["open"]
        file_menu.insertAction(first, self.open_action)
        self.recent_menu = file_menu.addMenu("Recent recor&dings")
        file_menu.insertMenu(first, self.recent_menu)
        self._fill_recent(self.recent.read())
        self.window.fileDropped.connect(self._on_dropped)

    # ---- opening -------------------------------------------------------------------------------
    def open(self, path: str) -> bool:
        """Open the recording at ``path``; False (and a dialog) when it is not one."""
        if not is_recording(path):
            self._on_failed(not_a_recording(path), "")
            return False
        self.close_source()
        self.source = RecordingSource(path, self)
        self.source.loaded.connect(self._on_loaded)
        self.source.stateChanged.connect(self._on_follow_state)
        self.source.failed.connect(self._on_failed)
        self.page.timeline.set_following(True)
        self.timeline.set_following(True)
        self._on_follow_state(FollowState.READING)
        self.source.start()
        self._fill_recent(self.recent.add(os.path.abspath(path)))
        return True

    def close_source(self, timeout_s: float = 10.0) -> None:
        if self.source is not None:
            self.source.close(timeout_s)
            self.source.deleteLater()
            self.source = None

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop reading (call after the session's workers have been joined)."""
        self.close_source(timeout_s)

    @Slot(str, str)
    def _on_failed(self, sentence: str, details: str) -> None:
        if self._from_closed_source():
            return  # a recording closed (or declined) since: its failure is not news
        dialog = self.show_error(sentence, details)
        if hasattr(dialog, "setWindowTitle"):
            dialog.setWindowTitle(RECORDING_FAILED_TITLE)
        self.failed.emit(sentence, details)

    def _from_closed_source(self) -> bool:
        """Whether the signal being handled came from a source closed since it was sent.
        (Only a RecordingSource counts: these slots are also called from other slots, where
        ``sender()`` is that slot's sender.)"""
        sender = self.sender()
        return isinstance(sender, RecordingSource) and sender is not self.source

    @Slot(object)
    def _on_loaded(self, data: RecordingData) -> None:
        if self._from_closed_source():
            return  # read before another recording was opened (or this one declined)
        if data.source == "fit" and "distances" in data.images:
            if not self._may_take_the_lab(data):
                return
            self._show_in_lab(data)
        else:
            first_read = self.page.data is None or self.page.data.path != data.path
            self.page.set_data(data)
            if first_read and data.complete and data.first_nonfinite is not None:
                self.page.go_to_first_bad()  # a finished run that went bad: show where
            if self._current_page() not in self.showing_recordings:
                self.pages.show_page(self.page_index)
        self.shown.emit(data)

    def _may_take_the_lab(self, data: RecordingData) -> bool:
        """Whether a read lab recording goes into the lab's views. Over a run that is going
        (which it ends), only if the user says so; a re-read of the recording the lab
        showed before a live run took the views back leaves that run alone."""
        if not self.session.state.going:
            self._in_lab = self.source
            return True
        if self._in_lab is self.source:
            return False  # a growing recording re-read while the live run has the views
        name = os.path.basename(os.path.normpath(data.path))
        if not self.confirm(
            STOP_RUN_TITLE,
            f"The lab recording {name!r} opens in the lab's views, which ends the run going "
            "now: it cannot be resumed afterwards. Stop the run and open the recording?",
        ):
            self.close_source()
            if self.live.active:  # the reading's state ("complete") is not the live run's
                self.live.show_state()
            return False
        self._in_lab = self.source
        return True

    def _show_in_lab(self, data: RecordingData) -> None:
        if self.session.state.going:
            self.session.stop()
        if self._current_page() not in self.showing_lab_recordings:
            self.pages.show_page(0)
        self.dock.show()
        self.live.active = False
        self.recorded.set_data(data)
        steps = matrix_steps(data)
        self.timeline.set_first_bad_step(
            None if data.first_nonfinite is None else int(data.first_nonfinite["step"])
        )
        self.timeline.set_steps(steps)

    @Slot(object)
    def _on_follow_state(self, state: FollowState) -> None:
        if self._from_closed_source():
            return  # a closed source's last word, queued before it closed
        data = self.source.data if self.source is not None else None
        damaged = data.damaged if data is not None else ()
        text = damage_label(damaged) if state is FollowState.DAMAGED else state.label
        done = (FollowState.COMPLETE, FollowState.FAILED, FollowState.DAMAGED)
        for timeline in (self.page.timeline, self.timeline, *self.more_timelines):
            timeline.set_state_text(text, growing=state is FollowState.FOLLOWING)
            timeline.state_label.setToolTip(damage_line(damaged))
            timeline.set_followable(state not in done)

    @Slot(int)
    def _on_rank_chosen(self, rank: int) -> None:
        if self.source is not None:
            self.source.set_rank(rank)

    @Slot(object)
    def _on_run_state(self, state: RunState) -> None:
        if state.going and not self.live.active:  # a live run takes the lab's views back
            self.timeline.play.setChecked(False)
            self.live.activate()
            self.dock.show()
        elif state is RunState.RUNNING and self.live.active:
            self.timeline.set_following(True)  # resumed: the newest step again

    @Slot(object)
    def _on_snapshot_shown(self, snapshot) -> None:
        """The timeline names the source the views show: a step of the live run shown over
        a recording (Show first NaN of the run stopped for it, a Reset's step 0) takes the
        timeline back from the recording, as a run that goes does."""
        on_a_recording = not self.live.active and self.recorded.data is not None
        if on_a_recording and snapshot.generation == self.session.generation:
            self.timeline.play.setChecked(False)
            self.live.activate()

    @Slot(int)
    def _on_timeline_index(self, index: int) -> None:
        if self.live.active:
            self.live.show_index(index)
        else:
            self.recorded.show_index(index)

    def arrays(self) -> dict[str, np.ndarray]:
        """The Model health page's arrays (File > Export view data)."""
        return self.page.arrays()

    # ---- menus -----------------------------------------------------------------------------
    def _choose_path(self) -> str:
        return QFileDialog.getExistingDirectory(self.window, "Open recording")

    @Slot()
    def choose_and_open(self) -> None:
        path = self.choose_path()
        if path:
            self.open(path)

    @Slot(str)
    def _on_dropped(self, path: str) -> None:
        if os.path.isdir(path):
            self.open(path)

    def _fill_recent(self, paths: list[str]) -> None:
        fill_recent_menu(self.recent_menu, paths, self.open)
