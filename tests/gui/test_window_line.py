"""The ``--screenshot`` line says what the window shows: run, page title, status bar text."""

from __future__ import annotations

from fixtures_app import isolated_settings, make_lab  # noqa: F401 - fixtures

from gradviz.gui.shell.window_line import screenshot_line, status_text


def test_the_line_names_the_page_shown_and_the_status_bar_as_it_reads(qtbot, make_lab):  # noqa: F811
    lab = make_lab()
    window = lab.window
    line = screenshot_line("shot.png", 1024, 700, window, lab.session)
    assert line.startswith("saved shot.png (1024x700); ")
    assert "; page Distance-fit lab; status: " in line
    assert line.endswith("status: " + status_text(window))
    window.pages.show_page(window.pages.bar.count() - 1)  # the last page, by its tab
    title = window.pages.bar.tabText(window.pages.bar.count() - 1)
    assert f"; page {title}; " in screenshot_line("s.png", 1, 1, window, lab.session)


def test_the_status_part_joins_the_labels_that_say_something(qtbot, make_lab):  # noqa: F811
    lab = make_lab()
    labels = lab.window.status_labels
    for label in labels.values():
        label.setText("")
    labels["state"].setText("paused")
    labels["nan"].setText("gradients finite")
    assert status_text(lab.window) == "paused | gradients finite"


def test_pages_other_than_the_lab_never_show_the_labs_status(qtbot, make_lab):  # noqa: F811
    lab = make_lab()
    window = lab.window
    assert "steps done" in status_text(window)
    for index in range(1, window.pages.bar.count()):  # Model health, Runs, the explorer ...
        window.pages.show_page(index)
        assert status_text(window) == "", window.pages.bar.tabText(index)
    window.pages.show_page(0)
    assert "steps done" in status_text(window)
