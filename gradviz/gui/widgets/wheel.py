"""Scrolling a panel over its combo boxes and spin boxes scrolls the panel.

Qt gives a wheel event to the widget under the pointer first, so scrolling down a setup panel
changed the value of each combo box or spin box that passed under the pointer (a network's
activation turned to ``sigmoid`` and the run restarted). A guarded widget takes the wheel only
once it has the focus (after a click, or Tab); until then the wheel scrolls the panel.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractScrollArea, QApplication, QWidget


class _WheelGuard(QObject):
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if event.type() != QEvent.Type.Wheel or watched.hasFocus():
            return False
        # Handed to the panel itself: Qt passes an ignored wheel event on to the parents
        # only where it came from the window system, and the panel is the one meant.
        panel = _panel_of(watched)
        if panel is not None:
            QApplication.sendEvent(panel.viewport(), event)
        return True


def _panel_of(widget: QObject) -> QAbstractScrollArea | None:
    """The nearest panel holding ``widget`` that scrolls up and down (a network editor's
    own strip scrolls only sideways), else the nearest scrolled one."""
    areas = []
    parent = widget.parent()
    while parent is not None:
        if isinstance(parent, QAbstractScrollArea):
            bar = parent.verticalScrollBar()
            if bar.maximum() > bar.minimum():
                return parent
            areas.append(parent)
        parent = parent.parent()
    return areas[0] if areas else None


_guard: _WheelGuard | None = None


def wheel_scrolls_past(*widgets: QWidget) -> None:
    """Let the wheel scroll the panel past ``widgets`` until one of them has the focus."""
    global _guard
    if _guard is None:
        _guard = _WheelGuard(QApplication.instance())
    for widget in widgets:
        widget.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # not the wheel's focus
        widget.installEventFilter(_guard)
