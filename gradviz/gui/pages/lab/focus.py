"""Enter in a setup field hands the keyboard back to the lab.

Space, S and R are the run's one-key shortcuts, but in a text or number field they are
text. Once the user confirms a value with Enter, the field has done its job: the focus
leaves it, so the next Space runs, and the status bar says so.
"""

from __future__ import annotations

import contextlib

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Slot
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QApplication, QMainWindow, QWidget

_ENTER_KEYS = (Qt.Key.Key_Return, Qt.Key.Key_Enter)
HINT = "Applied. Space starts or pauses, S steps, R resets."


class EnterLeavesField(QObject):
    """Watches the key presses of the widgets inside ``area`` that take the focus.

    The form makes its editors on demand, so each is watched from the first time it takes
    the focus (key presses go to the focused widget). An application event filter would
    see them too, but it calls into Python for every event of the app (~200 a second in a
    running lab), and it lasts as long as the application, not the window."""

    def __init__(self, area: QWidget, window: QMainWindow) -> None:
        super().__init__(window)
        self.area = area
        self.window = window
        QApplication.instance().focusChanged.connect(self._on_focus_changed)

    @Slot(QWidget, QWidget)
    def _on_focus_changed(self, _old: QWidget | None, new: QWidget | None) -> None:
        if new is not None and self.area.isAncestorOf(new):
            new.installEventFilter(self)  # once per widget: Qt keeps one entry per filter

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if (
            event.type() == QEvent.Type.KeyPress
            and isinstance(event, QKeyEvent)
            and event.key() in _ENTER_KEYS
        ):
            QTimer.singleShot(0, self._leave_field)  # after the field has taken its value
        return False

    def _leave_field(self) -> None:
        focused = QApplication.focusWidget()
        if focused is not None and self.area.isAncestorOf(focused):
            self.window.setFocus(Qt.FocusReason.OtherFocusReason)
            self.window.statusBar().showMessage(HINT, 5000)

    def uninstall(self) -> None:
        app = QApplication.instance()
        if app is not None:
            with contextlib.suppress(RuntimeError, TypeError):  # already disconnected
                app.focusChanged.disconnect(self._on_focus_changed)
