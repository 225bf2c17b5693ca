"""The lab's layout reads cleanly at the default size: every dock tab bar is the live one of
its group (no stray, cut-off tab peeking out) and every hover hint fits its panel."""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import pytest
from fixtures_app import isolated_settings, make_lab, small  # noqa: F401 - fixtures
from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import QApplication, QDockWidget, QLabel, QMainWindow, QTabBar

from gradviz.gui.shell.dock_tabs import hide_stray_tab_bars
from gradviz.gui.widgets.panel import HINT, MatrixPanel

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pyqtgraph")


def _visible_tab_bars(window) -> list[QTabBar]:
    return [b for b in window.findChildren(QTabBar) if b.parent() is window and b.isVisible()]


def _assert_no_stray_tab_bars(window) -> None:
    bars = _visible_tab_bars(window)
    titles = sorted(tuple(b.tabText(i) for i in range(b.count())) for b in bars)
    assert titles == [("Loss", "Per-point Jacobians"), ("Predicted distances", "Target distances")]
    for bar in bars:  # each shows its whole titles
        for i in range(bar.count()):
            text_width = bar.fontMetrics().horizontalAdvance(bar.tabText(i))
            assert bar.tabRect(i).width() > text_width


def test_every_dock_tab_bar_is_a_live_one_with_readable_titles(qtbot, make_lab):
    lab = make_lab(small("safe"), wait_ready=False)
    window = lab.window
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: len(_visible_tab_bars(window)) == 2, timeout=10_000)
    _assert_no_stray_tab_bars(window)
    # Coming back from the explorer page rebuilds the layout: still no stray bar.
    window.pages.show_page(1)
    window.pages.show_page(0)
    qtbot.waitUntil(lambda: len(_visible_tab_bars(window)) == 2, timeout=10_000)
    _assert_no_stray_tab_bars(window)


def test_stray_tab_bars_qt_leaves_after_tabifying_into_a_nested_split_are_hidden(qtbot):
    # The lab's shape in miniature: two rows of three docks, a tab group in each row.
    window = QMainWindow()
    qtbot.addWidget(window)
    window.setDockNestingEnabled(True)
    docks = {}
    for name in ("setup", "a", "b", "c", "x", "y", "z", "a2", "x2"):
        dock = QDockWidget(name, window)
        dock.setObjectName(name)
        dock.setWidget(QLabel(name))
        docks[name] = dock
    window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, docks["setup"])
    window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, docks["a"])
    window.splitDockWidget(docks["a"], docks["x"], Qt.Orientation.Vertical)
    for left, right in (("a", "b"), ("b", "c"), ("x", "y"), ("y", "z")):
        window.splitDockWidget(docks[left], docks[right], Qt.Orientation.Horizontal)
    window.tabifyDockWidget(docks["a"], docks["a2"])
    window.tabifyDockWidget(docks["x"], docks["x2"])
    window.resize(1000, 700)
    window.show()
    qtbot.waitExposed(window)
    hide_stray_tab_bars(window)
    assert sorted(b.tabText(0) for b in _visible_tab_bars(window)) == ["a", "x"]
    window.restoreState(window.saveState())  # a rebuilt layout makes new bars
    window.resize(1100, 760)
    qtbot.waitUntil(lambda: len(_visible_tab_bars(window)) > 2, timeout=10_000)
    hide_stray_tab_bars(window)
    assert sorted(b.tabText(0) for b in _visible_tab_bars(window)) == ["a", "x"]
    window.resize(1000, 700)  # the live bars stay in Qt's hands
    qtbot.wait(50)
    assert sorted(b.tabText(0) for b in _visible_tab_bars(window)) == ["a", "x"]


def test_hover_hints_fit_their_panels_or_end_in_an_ellipsis_with_the_whole_hint_as_tooltip(
    qtbot, make_lab
):
    lab = make_lab(small("safe"), wait_ready=False)
    window = lab.window
    qtbot.waitExposed(window)
    panels = [p for p in window.findChildren(MatrixPanel) if p.isVisible()]
    assert len(panels) >= 5  # three matrices and the two coordinate-gradient panels
    for panel in panels:
        label = panel.readout
        qtbot.waitUntil(lambda label=label: label.contentsRect().width() > 0, timeout=10_000)
        shown = QLabel.text(label)  # what is drawn, not the whole text
        assert label.fontMetrics().horizontalAdvance(shown) <= label.contentsRect().width()
        assert label.height() >= label.fontMetrics().height()  # not cut at the bottom
        assert label.text() == HINT
        if shown != HINT:
            assert shown.endswith("…") and HINT in label.toolTip()


def _visible_docks(window) -> list[QDockWidget]:
    """The docks on screen (a tabbed-away dock is "visible" to Qt, but shows nothing)."""
    return [
        d
        for d in window.findChildren(QDockWidget)
        if d.isVisible() and not d.isFloating() and not d.visibleRegion().isEmpty()
    ]


@pytest.mark.parametrize("size", [(1024, 700), (1920, 1080)])
def test_no_two_visible_docks_overlap_and_none_is_cut_off(qtbot, make_lab, size):
    lab = make_lab(small("safe"), wait_ready=False)
    window = lab.window
    window.resize(*size)
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: window.size().width() == size[0], timeout=10_000)
    for _ in range(3):
        QApplication.processEvents()
    docks = _visible_docks(window)
    assert len(docks) >= 8
    inside = window.rect()
    for k, dock in enumerate(docks):
        box = dock.geometry()
        assert inside.contains(box), (dock.windowTitle(), box, inside)
        assert box.width() >= dock.minimumSizeHint().width(), dock.windowTitle()
        # Nor is its content squeezed below its narrowest (controls drawn over the edge).
        content = dock.widget()
        assert content.width() >= content.minimumSizeHint().width(), dock.windowTitle()
        for other in docks[k + 1 :]:
            assert not box.intersects(other.geometry()), (dock.windowTitle(), other.windowTitle())


def test_at_the_smallest_window_every_map_keeps_its_height_and_no_control_leaves_its_dock(
    qtbot, make_lab
):
    """960 x 600 with a finished run (its timeline under the views): the health maps were
    strips of some 30 px under their legends, and the bottom row ran past the window's
    edge, "residuals" over the next dock. Geometry, not pixels."""
    from fixtures_app import RUN_TIMEOUT_MS
    from PySide6.QtCore import QPoint, QSize
    from PySide6.QtWidgets import QCheckBox, QComboBox

    from gradviz.gui.run.session import RunState
    from gradviz.gui.shell.main_window import MIN_WINDOW_SIZE
    from gradviz.gui.widgets.panel import MIN_PLOT_HEIGHT

    lab = make_lab(small("naive", steps=20))
    window = lab.window
    window.resize(*MIN_WINDOW_SIZE)
    qtbot.waitExposed(window)
    lab.start()
    qtbot.waitUntil(lambda: lab.session.state is RunState.FINISHED, timeout=RUN_TIMEOUT_MS)
    qtbot.waitUntil(lambda: lab.recordings.dock.isVisible(), timeout=10_000)
    qtbot.waitUntil(lambda: window.size() == QSize(*MIN_WINDOW_SIZE), timeout=10_000)
    for _ in range(3):
        QApplication.processEvents()
    coord_grads = lab.views.views["coord_grads"].widget
    maps = {
        "Gradient health": lab.views.views["mask"].widget,
        "coordinate gradients' health": coord_grads.health,
        "coordinate gradients": coord_grads.values,
    }
    for name, panel in maps.items():
        assert panel.graphics.height() >= MIN_PLOT_HEIGHT, name
        # The map itself, axes aside (it was a strip of some 30 px).
        assert panel.view.sceneBoundingRect().height() >= 40, name
    docks = _visible_docks(window)
    assert lab.recordings.dock in docks and len(docks) >= 9
    for k, dock in enumerate(docks):
        box = dock.geometry()
        assert window.rect().contains(box), (dock.windowTitle(), box)
        content = dock.widget()
        hint = content.minimumSizeHint()
        assert content.width() >= hint.width(), dock.windowTitle()
        assert content.height() >= hint.height(), dock.windowTitle()
        for other in docks[k + 1 :]:
            assert not box.intersects(other.geometry()), (dock.windowTitle(), other.windowTitle())
        # Every label, check box and list drawn in the dock stays in it (the part drawn:
        # a scrolled form's rows are clipped by its viewport).
        for kind in (QLabel, QCheckBox, QComboBox):
            for child in content.findChildren(kind):
                drawn = child.visibleRegion().boundingRect()
                if not child.isVisible() or drawn.isEmpty():
                    continue
                drawn.moveTopLeft(child.mapTo(window, drawn.topLeft()))
                assert box.contains(drawn), (dock.windowTitle(), kind.__name__, drawn, box)
    residuals = lab.views.views["points"].widget.links_box
    at = QRect(residuals.mapTo(window, QPoint(0, 0)), residuals.size())
    assert window.docks["points"].geometry().contains(at)
    assert not at.intersects(window.docks["coord_grads"].geometry())


def test_at_full_hd_the_views_get_the_width_not_the_setup_column(qtbot, make_lab):
    lab = make_lab(small("safe"), wait_ready=False)
    window = lab.window
    window.resize(1920, 1080)
    qtbot.waitExposed(window)
    window.reset_layout()
    for _ in range(3):
        QApplication.processEvents()
    setup = window.docks["setup"].width()
    assert setup <= 420
    assert window.docks["distances"].width() >= (1920 - setup) / 3 - 40


@pytest.mark.parametrize("size", [(1024, 700), (1920, 1080)])
def test_the_explorer_page_fits_with_a_readable_model_panel(qtbot, make_lab, size):
    lab = make_lab(small("safe"), wait_ready=False)
    window = lab.window
    window.resize(*size)
    qtbot.waitExposed(window)
    window.pages.show_page(1)
    explorer, panel = lab.explorer, lab.models.panel
    qtbot.waitUntil(lambda: explorer.isVisible() and panel.isVisible())
    for _ in range(3):
        QApplication.processEvents()
    # Neither side is cut: each gets at least its narrowest width, the model panel enough
    # for its table and its hints.
    assert explorer.width() >= explorer.minimumSizeHint().width()
    assert panel.width() >= 220
    assert explorer.geometry().right() < panel.geometry().left()


def test_a_long_first_non_finite_status_ends_in_an_ellipsis_with_the_whole_text_as_tip(
    qtbot, make_lab
):
    lab = make_lab(small("naive"), wait_ready=False)
    window = lab.window
    window.resize(1024, 700)
    qtbot.waitExposed(window)
    label = window.status_labels["nan"]
    long = "NaN/Inf gradient first at step 0 · non-finite loss first at step 1 " * 3
    label.setText(long)
    qtbot.waitUntil(lambda: QLabel.text(label) != long)
    assert label.text() == long  # what the status says, whole
    assert QLabel.text(label).endswith("…")  # what fits, visibly cut
    assert long in label.toolTip()
    assert label.geometry().right() <= window.statusBar().width()


def test_tick_labels_of_a_narrow_matrix_panel_never_run_together(qtbot):
    """At 1024 x 700 the distance ticks read "50100150": 200 points on a ~100 px axis."""
    import numpy as np

    from gradviz.gui.widgets.heatmap import HeatmapView

    view = HeatmapView("d_pred")
    qtbot.addWidget(view)
    view.resize(260, 240)
    view.show()
    qtbot.waitExposed(view)
    view.set_matrix(np.random.default_rng(0).random((200, 200), dtype=np.float32))
    for _ in range(3):
        QApplication.processEvents()
    for side in ("bottom", "left"):
        axis = view.plot.getAxis(side)
        lo, hi = sorted(axis.range)  # the matrices' y axis runs downwards
        length = axis.width() if side == "bottom" else axis.height()
        levels = axis.tickValues(lo, hi, length)
        spacing, values = levels[0]
        assert len(values) >= 2, (side, lo, hi, length, levels)
        pixels = spacing * length / (hi - lo)
        assert pixels >= axis.label_room(lo, hi, spacing), (side, spacing, pixels)


def test_dock_tabs_show_their_whole_titles_at_1024_px(qtbot, make_lab):
    lab = make_lab(small("safe"), wait_ready=False)
    window = lab.window
    window.resize(1024, 700)
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: len(_visible_tab_bars(window)) == 2, timeout=10_000)
    for _ in range(3):
        QApplication.processEvents()
    for bar in _visible_tab_bars(window):
        assert bar.elideMode() == Qt.TextElideMode.ElideNone  # never "Lo…"
        assert bar.usesScrollButtons()


def test_the_timeline_dock_is_one_row_high_at_full_hd(qtbot, make_lab):
    """At 1920 x 1080 the Timeline dock took a third of the window, empty."""
    lab = make_lab(small("safe"), wait_ready=False)
    window = lab.window
    window.resize(1920, 1080)
    qtbot.waitExposed(window)
    dock = lab.recordings.dock
    dock.show()
    qtbot.waitUntil(lambda: dock.isVisible(), timeout=10_000)
    for _ in range(3):
        QApplication.processEvents()
    timeline = lab.recordings.timeline
    assert timeline.height() <= timeline.sizeHint().height() + 2
    assert dock.height() < 1080 / 10


def test_log_axis_labels_within_one_decade_never_run_together(qtbot):
    """A short loss axis within one decade read "98765432": every minor label was drawn."""
    from gradviz.gui.widgets.loss import LossView

    view = LossView()
    qtbot.addWidget(view)
    view.resize(160, 220)
    view.show()
    qtbot.waitExposed(view)
    axis = view.plot.getAxis("left")
    lo, hi = sorted(axis.range)
    levels = axis.tickValues(lo, hi, axis.height())
    at = sorted(v * axis.height() / (hi - lo) for _, values in levels for v in values)
    assert len(at) >= 2
    room = axis.label_room(lo, hi, 1.0)
    assert all(b - a >= room for a, b in zip(at, at[1:])), at
