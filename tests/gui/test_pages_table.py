"""The window's pages come from one table: its lines are the tabs, in its order, each page
made by its factory from what it says it needs."""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import dataclasses

import pytest
from fixtures_app import isolated_settings, lab  # noqa: F401 - fixtures
from PySide6.QtWidgets import QLabel

from gradviz.gui.shell.page_table import PAGES, PageEntry

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pyqtgraph")


def test_the_tabs_are_the_tables_lines_in_its_order(lab):
    bar = lab.window.pages.bar
    assert [bar.tabText(k) for k in range(bar.count())] == [e.title for e in PAGES]
    assert list(lab.pages) == [e.key for e in PAGES]
    for k, entry in enumerate(PAGES):
        assert lab.page_index(entry.key) == k
        lab.window.pages.show_page(k)
        assert lab.window.readouts()["page"] == entry.title
        # Ctrl+<k+1> shows it too.
        lab.window.pages.show_page(0)
        lab.window.pages.actions[k].trigger()
        assert lab.window.pages.current() == k


def test_each_page_is_made_from_exactly_what_its_line_says_it_needs(monkeypatch, build):
    seen: dict[str, set[str]] = {}

    def recording(entry: PageEntry) -> PageEntry:
        def factory(**needs):
            seen[entry.key] = set(needs)
            return entry.factory(**needs)

        return dataclasses.replace(entry, factory=factory)

    build(tuple(recording(e) for e in PAGES))
    assert seen == {e.key: set(e.needs) for e in PAGES}


def test_a_new_line_in_the_table_is_a_new_page_after_the_others(build):
    class Notes:
        def __init__(self, window, session):
            self.window, self.session = window, session
            self.widget = QLabel("notes")

        def readouts(self) -> dict:
            return {"text": self.widget.text()}

    extra = PageEntry("notes", "Notes", Notes, ("window", "session"))
    app = build((*PAGES, extra))
    notes = app.pages["notes"]
    assert notes.window is app.window and notes.session is app.session
    assert app.page_index("notes") == len(PAGES)
    app.window.pages.show_page(len(PAGES))
    assert notes.widget.isVisible()
    assert app.window.readouts() == {"page": "Notes", "text": "notes"}


def test_gradviz_gui_page_names_are_the_tables_keys():
    from gradviz.cli import build_parser

    gui = build_parser()._subparsers._group_actions[0].choices["gui"]
    (page,) = [a for a in gui._actions if a.dest == "page"]
    assert tuple(page.choices) == tuple(e.key for e in PAGES)


@pytest.fixture
def build(qtbot, monkeypatch, isolated_settings):
    """``build(pages)``: the app made from ``pages``, shown; closed and deleted afterwards."""
    from gradviz.gui.shell import compose
    from gradviz.gui.shell.app import build_controller

    made = []

    def make(pages):
        monkeypatch.setattr(compose, "PAGES", pages)
        app = build_controller(log_path=str(isolated_settings / "gradviz.log"))
        made.append(app)
        app.window.show()
        qtbot.waitExposed(app.window)
        return app

    yield make
    for app in made:
        app.shutdown()
        app.window.close()
        app.window.deleteLater()
