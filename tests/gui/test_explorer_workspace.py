"""The page switch that puts the explorer beside the dock-based distance-fit lab."""

from __future__ import annotations

from types import SimpleNamespace

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QLabel, QMainWindow

from gradviz.gui.shell.workspace import WorkspacePages


def make_window(qtbot):
    window = QMainWindow()
    qtbot.addWidget(window)
    docks = []
    for name in ("distances", "loss", "closed-by-user"):
        dock = QDockWidget(name, window)
        dock.setObjectName(name)
        dock.setWidget(QLabel(name))
        window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
        docks.append(dock)
    page = QLabel("explorer page")
    pages = WorkspacePages(window)
    pages.add_page("Lab", SimpleNamespace(widget=None))  # the window's docks
    pages.add_page("Jacobian explorer", SimpleNamespace(widget=page))
    window.resize(900, 600)
    window.show()
    qtbot.waitExposed(window)
    docks[2].hide()
    return window, docks, page, pages


def test_explorer_page_takes_the_window_and_the_lab_comes_back_as_it_was(qtbot):
    window, docks, page, pages = make_window(qtbot)
    pages.show_page(1)
    assert page.isVisible()
    assert not any(d.isVisible() for d in docks)
    assert page.width() > 800  # the page fills the window, not a corner of it
    pages.show_page(0)
    assert not page.isVisible()
    assert docks[0].isVisible() and docks[1].isVisible()
    assert not docks[2].isVisible()  # a dock the user had closed stays closed


def test_closing_on_the_explorer_page_restores_the_docks_first(qtbot):
    window, docks, page, pages = make_window(qtbot)
    pages.bar.setCurrentIndex(1)
    window.close()
    assert pages.current() == 0
    assert not docks[0].isHidden() and not docks[1].isHidden()
