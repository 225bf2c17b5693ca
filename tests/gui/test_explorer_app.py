"""The explorer inside the real app window: its page, its errors, its thread on close."""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import numpy as np
import pytest
from fixtures_app import isolated_settings, make_lab, small  # noqa: F401 - fixtures

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pyqtgraph")

TIMEOUT_MS = 120_000


def test_explorer_page_computes_and_its_failure_opens_the_error_dialog(qtbot, make_lab, tmp_path):
    lab = make_lab(small())
    window, tab = lab.window, lab.explorer
    assert not tab.worker_running()  # nothing starts until the page is opened
    window.pages.show_page(1)
    assert tab.isVisible() and not lab.window.docks["distances"].isVisible()
    path = tmp_path / "wide.csv"
    np.savetxt(path, np.ones((4, 5)), delimiter=",")
    s = tab.settings
    s.kind_box.setCurrentIndex(s.kind_box.findData("file"))
    s.file_field.set_path(str(path))
    tab.set_spec_text("2-20-20-4")
    tab.compute()
    qtbot.waitUntil(lambda: lab.error_dialog is not None, timeout=TIMEOUT_MS)
    assert "5 columns" in lab.error_dialog.sentence
    assert "Jacobians" in lab.error_dialog.windowTitle()
    lab.error_dialog.close()

    s.kind_box.setCurrentIndex(s.kind_box.findData("random"))
    tab.compute()
    qtbot.waitUntil(lambda: tab.result is not None and not tab.busy, timeout=TIMEOUT_MS)
    assert tab.result.constant


def test_closing_the_app_on_the_explorer_page_joins_its_thread_and_keeps_the_lab_layout(
    qtbot, make_lab
):
    lab = make_lab(small())
    window, tab = lab.window, lab.explorer
    window.pages.show_page(1)
    tab.compute()
    qtbot.waitUntil(lambda: tab.worker_running(), timeout=TIMEOUT_MS)
    lab.shutdown()
    assert lab.thread_count == 0 and not tab.worker_running()
    assert window.pages.current() == 0
    assert window.docks["distances"].isVisible()  # the saved layout is the lab's
