"""A closed lab goes away whole: its objects are freed, nothing queued reaches its deleted
widgets, and no Python wrapper outlives the Qt object it stands for."""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import gc
import weakref

import pytest
import shiboken6
from fixtures_app import LOAD_TIMEOUT_MS, isolated_settings, small  # noqa: F401 - fixtures
from PySide6.QtCore import QCoreApplication, QEvent
from PySide6.QtWidgets import QTreeWidget

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pyqtgraph")


def _delete_now(qtbot, widget) -> None:
    widget.close()
    widget.deleteLater()
    for _ in range(3):
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        qtbot.wait(10)


def test_the_setup_forms_tree_leaves_no_live_wrapper_of_its_root_item(qtbot):
    from gradviz.gui.widgets.settings_form import SetupForm

    form = SetupForm()
    # Qt makes the invisible root item and deletes it with the tree; pyqtgraph keeps a
    # Python wrapper of it. Left valid, that wrapper would answer for whatever Qt puts at
    # the freed address next.
    root = QTreeWidget.invisibleRootItem(form.tree)
    assert shiboken6.isValid(root)
    shiboken6.delete(form)
    assert not shiboken6.isValid(root)


def _closed_lab(qtbot, log_dir) -> tuple[weakref.ref, weakref.ref]:
    """A lab closed and deleted right after torch loaded: weak references to its window and
    controller."""
    from gradviz.gui.shell.app import build_controller

    lab = build_controller(small("safe"), log_path=str(log_dir / "gradviz.log"))
    lab.window.show()
    lab.start_loading()
    qtbot.waitUntil(lambda: lab.torch_ready, timeout=LOAD_TIMEOUT_MS)
    # Close at once: the worker's first frames are still queued for the GUI thread. Any
    # that reached a deleted widget would raise in a slot, which fails the test.
    lab.shutdown()
    _delete_now(qtbot, lab.window)
    return weakref.ref(lab.window), weakref.ref(lab)


def test_a_closed_lab_is_freed_and_its_queued_frames_reach_no_deleted_widget(
    qtbot, isolated_settings
):
    window, controller = _closed_lab(qtbot, isolated_settings)
    qtbot.wait(50)
    gc.collect()
    assert window() is None and controller() is None
