"""Enter in a setup field hands the keyboard back to the lab.

Space, S and R are the run's one-key shortcuts, but in a text or number field they are
text. Once the user confirms a value with Enter, the field has done its job: the focus
leaves it, so the next Space runs, and the status bar says so.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QApplication, QMainWindow, QWidget

_ENTER_KEYS = (Qt.Key.Key_Return, Qt.Key.Key_Enter)
HINT = "Applied. Space starts or pauses, S steps, R resets."


class EnterLeavesField(QObject):
    """Watches the key presses of every widget inside ``area`` (an application event
    filter, since the form makes its editors on demand)."""

    def __init__(self, area: QWidget, window: QMainWindow) -> None:
        super().__init__(window)
        self.area = area
        self.window = window
        QApplication.instance().installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if (
            event.type() == QEvent.Type.KeyPress
            and isinstance(event, QKeyEvent)
            and event.key() in _ENTER_KEYS
            and isinstance(watched, QWidget)
            and self.area.isAncestorOf(watched)
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
            app.removeEventFilter(self)
