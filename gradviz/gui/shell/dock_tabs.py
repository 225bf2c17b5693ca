"""Hides the stray dock tab bars that QMainWindow leaves behind.

Qt 6 (seen with 6.11) creates a fresh QTabBar for a tab group each time a dock is tabified
into a nested split and each time ``restoreState`` rebuilds the layout, but keeps the old
bars shown at their old place. The live bar moves with the layout; a stray one stays put
and peeks out from under the docks, e.g. as a cut-off "Lo" tab beside "Loss". Qt never
touches a stray bar again (it shows the bars it uses as it lays them out), so hiding the
ones that sit under no dock after each layout change is enough.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QMainWindow, QTabBar

#: How far (pixels) a live bar may sit from the edge of the dock it belongs to.
_TOLERANCE = 3


def hide_stray_tab_bars(window: QMainWindow) -> int:
    """Hide the window's dock tab bars that belong to no visible dock; returns how many."""
    docks = [d for d in window.findChildren(QDockWidget) if d.isVisible() and not d.isFloating()]
    hidden = 0
    for bar in window.findChildren(QTabBar):
        if bar.parent() is not window or not bar.isVisible():
            continue  # the docks' own tab widgets, and bars already hidden
        if not any(_is_bar_of(bar, dock) for dock in docks):
            bar.hide()
            hidden += 1
    return hidden


def keep_tab_titles_whole(window: QMainWindow) -> None:
    """Dock tabs show their whole titles, with scroll arrows where the group is too narrow
    for them all: an elided "Lo…" named no view (at 1024 px the Loss and Per-point
    Jacobians tabs share 165 px)."""
    for bar in window.findChildren(QTabBar):
        if bar.parent() is window and bar.elideMode() != Qt.TextElideMode.ElideNone:
            bar.setElideMode(Qt.TextElideMode.ElideNone)
            bar.setUsesScrollButtons(True)


def _is_bar_of(bar: QTabBar, dock: QDockWidget) -> bool:
    """Whether ``bar`` is the tab bar of ``dock``'s group, placed on one of its edges."""
    titles = {bar.tabText(i) for i in range(bar.count())}
    if dock.windowTitle() not in titles:
        return False
    b, d = bar.geometry(), dock.geometry()
    near = _TOLERANCE
    same_column = abs(b.left() - d.left()) <= near
    same_row = abs(b.top() - d.top()) <= near
    below_or_above = same_column and (
        abs(b.top() - d.bottom() - 1) <= near or abs(b.bottom() + 1 - d.top()) <= near
    )
    beside = same_row and (
        abs(b.left() - d.right() - 1) <= near or abs(b.right() + 1 - d.left()) <= near
    )
    return below_or_above or beside
