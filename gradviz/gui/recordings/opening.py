"""File > Open recording (also Recent, drag and drop, ``gradviz gui RECORDING``).

A lab recording (``gradviz fit --record``) opens in the lab's views with a timeline dock
under them; a ``watch`` recording opens in the Model health page. Reading and following
happen in a ``RecordingSource`` (off the GUI thread). A live run that starts takes the
views back.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from PySide6.QtCore import QObject, QSettings, Qt, Signal, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QFileDialog, QMainWindow

from gradviz.core.record.reader import is_recording
from gradviz.gui.lab.session import RunSession, RunState
from gradviz.gui.lab.views import LabViews
from gradviz.gui.pages import WorkspacePages
from gradviz.gui.recordings.data import RecordingData
from gradviz.gui.recordings.follower import FollowState, RecordingSource
from gradviz.gui.recordings.health_page import PAGE_TITLE, ModelHealthPage
from gradviz.gui.recordings.recorded_run import RecordedRun, matrix_steps
from gradviz.gui.recordings.timeline import Timeline
from gradviz.gui.settings import RecentFiles

RECENT_RECORDINGS_KEY = "recent_recordings"


class Recordings(QObject):
    """Opens recordings into ``window``: the Model health page, the lab's timeline dock.

    ``shown(RecordingData)`` is emitted each time a read recording has been put on screen.
    """

    shown = Signal(object)

    def __init__(
        self,
        window: QMainWindow,
        pages: WorkspacePages,
        views: LabViews,
        session: RunSession,
        settings: QSettings,
        show_error: Callable[[str, str], object],
    ) -> None:
        super().__init__(window)
        self.window, self.pages, self.views, self.session = window, pages, views, session
        self.show_error = show_error
        self.recent = RecentFiles(settings, RECENT_RECORDINGS_KEY)
        self.source: RecordingSource | None = None
        self.recorded = RecordedRun(self)
        self.recorded.snapshotShown.connect(views.show)
        self.page = ModelHealthPage()
        self.page.rankChosen.connect(self._on_rank_chosen)
        self.page_index = pages.add_page(PAGE_TITLE, self.page)
        self.timeline = Timeline()
        self.timeline.indexChanged.connect(self.recorded.show_index)
        self.dock = QDockWidget("Timeline", window)
        self.dock.setObjectName("dock-timeline")
        self.dock.setWidget(self.timeline)
        window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.dock)
        self.dock.hide()
        self.choose_path: Callable[[], str] = self._choose_path
        self._make_menu()
        session.stateChanged.connect(self._on_run_state)

    def _make_menu(self) -> None:
        self.open_action = QAction("Open r&ecording…", self.window)
        self.open_action.setShortcut(QKeySequence("Ctrl+Shift+O"))
        self.open_action.setToolTip("Open a recording (gradviz.watch or gradviz fit --record)")
        self.open_action.triggered.connect(self._on_open_triggered)
        self.window.addAction(self.open_action)
        file_menu = self.window.menuBar().actions()[0].menu()
        first = file_menu.actions()[0]
        file_menu.insertAction(first, self.open_action)
        self.recent_menu = file_menu.addMenu("Recent recor&dings")
        file_menu.insertMenu(first, self.recent_menu)
        self._fill_recent(self.recent.read())
        self.window.fileDropped.connect(self._on_dropped)

    # ---- opening -------------------------------------------------------------------------------
    def open(self, path: str) -> bool:
        """Open the recording at ``path``; False (and a dialog) when it is not one."""
        if not is_recording(path):
            self.show_error(
                f"{path!r} is not a gradviz recording: open a directory written by "
                "gradviz.watch or gradviz fit --record.",
                "",
            )
            return False
        self.close_source()
        self.source = RecordingSource(path, self)
        self.source.loaded.connect(self._on_loaded)
        self.source.stateChanged.connect(self._on_follow_state)
        self.source.failed.connect(self.show_error)
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
        self.close_source(timeout_s)

    @Slot(object)
    def _on_loaded(self, data: RecordingData) -> None:
        if data.source == "fit" and "distances" in data.images:
            self._show_in_lab(data)
        else:
            self.page.set_data(data)
            self.pages.show_page(self.page_index)
        self.shown.emit(data)

    def _show_in_lab(self, data: RecordingData) -> None:
        if self.session.state.going:
            self.session.stop()
        self.pages.show_page(0)
        self.dock.show()
        self.recorded.set_data(data)
        steps = matrix_steps(data)
        self.timeline.set_first_bad_step(
            None if data.first_nonfinite is None else int(data.first_nonfinite["step"])
        )
        self.timeline.set_steps(steps)

    @Slot(object)
    def _on_follow_state(self, state: FollowState) -> None:
        for timeline in (self.page.timeline, self.timeline):
            timeline.set_state_text(state.label)
            timeline.set_followable(state is not FollowState.COMPLETE)

    @Slot(int)
    def _on_rank_chosen(self, rank: int) -> None:
        if self.source is not None:
            self.source.set_rank(rank)

    @Slot(object)
    def _on_run_state(self, state: RunState) -> None:
        if state.going:  # a live run takes the lab's views back
            self.dock.hide()
            self.timeline.play.setChecked(False)

    # ---- menus -----------------------------------------------------------------------------
    def _choose_path(self) -> str:
        return QFileDialog.getExistingDirectory(self.window, "Open recording")

    @Slot()
    def _on_open_triggered(self) -> None:
        path = self.choose_path()
        if path:
            self.open(path)

    @Slot(str)
    def _on_dropped(self, path: str) -> None:
        if os.path.isdir(path):
            self.open(path)

    def _fill_recent(self, paths: list[str]) -> None:
        self.recent_menu.clear()
        for path in paths:
            action = self.recent_menu.addAction(path)
            action.setData(path)
            action.triggered.connect(self._on_recent)
        self.recent_menu.setEnabled(bool(paths))

    @Slot()
    def _on_recent(self) -> None:
        action = self.sender()
        if isinstance(action, QAction):
            self.open(str(action.data()))
