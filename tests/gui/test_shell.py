"""What is the window's and what is a page's, tried as a user would: the lab's run controls
show only on the lab, the title names the page shown, Help opens the documentation and lists
the shortcuts."""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import pytest
from fixtures_app import isolated_settings, lab, make_lab, small  # noqa: F401 - fixtures
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
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


def test_help_documentation_opens_the_docs_beside_this_checkout_and_nothing_here(lab):
    from pathlib import Path

    help_menu = _menu(lab.window, "&Help")
    docs = lab.window.actions["docs"]
    assert docs in help_menu.actions() and docs.isEnabled()
    opened = []
    lab.help.open_url = lambda url: opened.append(url) or True  # opens nothing
    docs.trigger()
    root = Path(__file__).resolve().parents[2]
    places = [root / "site" / "index.html", root / "docs", root / "README.md"]
    first = next(p for p in places if p.exists())
    assert [url.toLocalFile() for url in opened] == [str(first)]


def test_the_documentation_is_the_built_site_else_the_docs_folder_else_the_readme(tmp_path):
    from gradviz.gui.shell.help_menu import documentation_url

    assert documentation_url(tmp_path) is None  # not a checkout (an installed package)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "gradviz").mkdir()
    assert documentation_url(tmp_path) is None  # a checkout without its documentation
    (tmp_path / "README.md").write_text("# gradviz")
    assert documentation_url(tmp_path).toLocalFile() == str(tmp_path / "README.md")
    (tmp_path / "docs").mkdir()
    assert documentation_url(tmp_path).toLocalFile() == str(tmp_path / "docs")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("<html></html>")
    assert documentation_url(tmp_path).toLocalFile() == str(tmp_path / "site" / "index.html")


def test_without_documentation_the_entry_is_off_and_says_why(qtbot):
    from gradviz.gui.shell.help_menu import HelpMenu
    from gradviz.gui.shell.main_window import MainWindow

    window = MainWindow()
    qtbot.addWidget(window)
    help_menu = HelpMenu(window, "", docs_url=None)
    help_menu.open_url = lambda url: pytest.fail(f"opened {url}")
    docs = window.actions["docs"]
    assert not docs.isEnabled() and "No documentation" in docs.toolTip()
    assert help_menu.open_documentation() is False


def test_keyboard_shortcuts_lists_every_action_with_a_shortcut_from_the_actions(qtbot, lab):
    window = lab.window
    assert window.actions["shortcuts"] in _menu(window, "&Help").actions()
    window.actions["shortcuts"].trigger()
    dialog = lab.help.shortcuts_dialog
    assert dialog is not None and dialog.isVisible()
    native = QKeySequence.SequenceFormat.NativeText
    expected = {
        (a.shortcut().toString(native), a.text().replace("&", "").rstrip("…"))
        for a in window.findChildren(QAction)
        if not a.shortcut().isEmpty()
    }
    rows = dialog.table_rows()
    assert {(keys, text) for keys, text, _menu_title in rows} == expected
    assert len(rows) == len(expected)  # each action once
    for row in [
        ("Space", "Start or pause", "Window"),  # in no menu: Start and Pause are
        ("S", "Step once", "Run"),
        ("Ctrl+W", "Why NaN here?", "Run"),
        ("Ctrl+Shift+O", "Open recording", "File"),
        ("F1", "Documentation", "Help"),
        ("Ctrl+1", "Show Distance-fit lab", "Window"),
    ]:
        assert row in rows
    # Built from the actions each time: a new one is listed, never a hand-kept table.
    zoom = QAction("Zoom &in", window)
    zoom.setShortcut(QKeySequence("Ctrl+="))
    window.addAction(zoom)
    window.actions["shortcuts"].trigger()
    assert ("Ctrl+=", "Zoom in", "Window") in lab.help.shortcuts_dialog.table_rows()


def _menu(window, title: str):
    (menu,) = [a.menu() for a in window.menuBar().actions() if a.text() == title]
    return menu
