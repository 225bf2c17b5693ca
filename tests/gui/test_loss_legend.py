"""The loss plot's legend stays readable in a small plot: it folds away (the words under the
plot say what is folded, as a link that unfolds it), shortens earlier runs to "earlier k",
and gives the full labels in its tooltip; a wide plot shows them in full."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QMouseEvent, QTextDocument
from PySide6.QtWidgets import QApplication

from gradviz.gui.widgets.loss import LossView
from gradviz.gui.widgets.loss_earlier import EarlierRun
from gradviz.gui.widgets.loss_legend import FOLD_HEIGHT, FOLD_WIDTH, FULL_WIDTH

LABELS = [
    "earlier: net=8-17:relu-3, method=naive, … (318 steps)",
    "earlier: net=8-16-16:relu-3 (1,204 steps)",
    "earlier: lr=0.1 (40 steps)",
]


def plain(rich_text: str) -> str:
    document = QTextDocument()
    document.setHtml(rich_text)
    return document.toPlainText().replace("\xa0", " ")


@pytest.fixture
def loss_view(qtbot):
    def make(width: int, height: int) -> LossView:
        view = LossView()
        qtbot.addWidget(view)
        view.resize(width, height)
        view.show()
        qtbot.waitExposed(view)
        losses = np.geomspace(1.0, 1e-3, 50)
        view.set_history(losses)
        view.earlier.show_runs([EarlierRun(losses * (k + 2), text, "") for k, text in
                                enumerate(LABELS)])  # fmt: skip
        return view

    return make


def box_size(view: LossView) -> tuple[float, float]:
    box = view.plot.getViewBox()
    return box.width(), box.height()


def click_legend(view: LossView) -> None:
    """A real left click on the legend's middle, on the plot's viewport."""
    viewport = view.graphics.viewport()
    scene = view.legend.sceneBoundingRect().center()
    pos = QPointF(view.graphics.mapFromScene(scene))
    left, none = Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton
    for kind, buttons in ((QEvent.Type.MouseButtonPress, left),
                          (QEvent.Type.MouseButtonRelease, none)):  # fmt: skip
        at = QPointF(viewport.mapToGlobal(pos))
        event = QMouseEvent(kind, pos, at, left, buttons, Qt.KeyboardModifier.NoModifier)
        QApplication.sendEvent(viewport, event)


def test_a_small_plot_folds_the_legend_and_says_so_under_the_plot(qtbot, loss_view):
    view = loss_view(220, 230)  # the loss dock's size in a 1024x700 window
    width, height = box_size(view)
    assert width < FOLD_WIDTH or height < FOLD_HEIGHT
    assert view.legend.folded and not view.legend.isVisible()  # nothing covers the curves
    summary = plain(view.summary.text())
    assert summary.endswith("| 3 earlier runs: legend ▸")
    assert '<a href="legend">' in view.summary.text()
    # The link unfolds it: short names, the full labels in its tooltip, inside the plot.
    view.summary.linkActivated.emit("legend")  # what a click on the link does
    assert view.legend.isVisible()
    assert view.legend.rows() == ["loss", "earlier 1", "earlier 2", "earlier 3"]
    for k, label in enumerate(LABELS, 1):
        assert f"earlier {k}: {label}" in view.legend.toolTip()
    assert plain(view.summary.text()).endswith("| fold the legend ◂")
    # A click on the legend folds it again.
    click_legend(view)
    qtbot.waitUntil(lambda: view.legend.folded)
    assert not view.legend.isVisible()


def test_a_medium_plot_shows_short_names_inside_the_plot(qtbot, loss_view):
    view = loss_view(400, 300)
    width, _ = box_size(view)
    assert FOLD_WIDTH <= width < FULL_WIDTH
    assert view.legend.isVisible()
    assert view.legend.rows() == ["loss", "earlier 1", "earlier 2", "earlier 3"]
    box = view.plot.getViewBox().sceneBoundingRect()
    assert box.contains(view.legend.sceneBoundingRect())  # nothing cut off at the edge
    assert "legend" not in plain(view.summary.text())


def test_a_wide_plot_names_every_run_in_full_and_a_click_folds_it(qtbot, loss_view):
    view = loss_view(900, 500)
    assert view.legend.isVisible() and view.legend.rows() == ["loss", *LABELS]
    assert "legend" not in plain(view.summary.text())
    click_legend(view)
    qtbot.waitUntil(lambda: view.legend.folded)
    assert plain(view.summary.text()).endswith("| 3 earlier runs: legend ▸")
    view.resize(220, 230)  # the user's choice holds at every size
    qtbot.waitUntil(lambda: box_size(view)[0] < FOLD_WIDTH)
    view.summary.linkActivated.emit("legend")
    view.resize(900, 500)
    qtbot.waitUntil(lambda: box_size(view)[0] >= FULL_WIDTH)
    assert view.legend.isVisible() and view.legend.rows() == ["loss", *LABELS]
