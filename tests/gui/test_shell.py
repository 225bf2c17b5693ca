"""What is the window's and what is a page's, tried as a user would: the lab's run controls
show only on the lab, the title names the page shown."""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import pytest
from fixtures_app import isolated_settings, lab, make_lab, small  # noqa: F401 - fixtures
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QToolBar

from gradviz.gui.run.session import RunState

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pyqtgraph")


def test_the_labs_toolbar_run_menu_and_status_show_only_on_the_lab(lab):
    window, bar = lab.window, lab.window.pages.bar
    run_bar = window.findChild(QToolBar, "run-toolbar")
    run_menu = lab.lab.run_menu
    titles = [a.text() for a in window.menuBar().actions() if a.isVisible()]
    assert titles == ["&File", "&Edit", "&Run", "&View", "&Help"]
    assert window.windowTitle() == "gradviz — Distance-fit lab"
    assert run_bar.isVisible() and window.actions["why_nan"].isVisible()
    for k in range(1, bar.count()):
        window.pages.show_page(k)
        assert window.windowTitle() == f"gradviz — {bar.tabText(k)}"
        assert not run_bar.isVisible()
        shown = [a.text() for a in window.menuBar().actions() if a.isVisible()]
        assert shown == ["&File", "&Edit", "&View", "&Help"], bar.tabText(k)
        assert not any(a.isVisible() for a in run_menu.actions)
        assert not any(label.isVisible() for label in window.status_labels.values())
    window.pages.show_page(0)
    assert run_bar.isVisible() and all(a.isVisible() for a in run_menu.actions)
    assert all(label.isVisible() for label in window.status_labels.values())
    assert window.windowTitle() == "gradviz — Distance-fit lab"


def test_the_run_shortcuts_act_on_the_lab_only_while_it_shows(qtbot, make_lab):
    lab = make_lab(small("safe"))
    window = lab.window
    window.activateWindow()
    window.setFocus()
    generation = lab.session.generation
    window.pages.show_page(lab.page_index("graph"))
    for key in (Qt.Key.Key_Space, Qt.Key.Key_S, Qt.Key.Key_R):
        qtbot.keyClick(window, key)
    QApplication.processEvents()  # a shortcut would have been delivered by now
    assert lab.session.state is RunState.READY and lab.session.generation == generation
    assert lab.session.latest.step == 0
    window.pages.show_page(0)
    qtbot.keyClick(window, Qt.Key.Key_S)  # the same key on the lab steps its run
    qtbot.waitUntil(lambda: lab.session.latest.step == 1, timeout=60_000)
    assert lab.session.state is RunState.PAUSED
