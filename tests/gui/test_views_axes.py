"""Axes of the live views: ticks redrawn as pyqtgraph draws them, without leaking None.

PySide6 6.11.3 on Python 3.11 adds 6 references to None for every QPainter opened on a
newly made paint device; pyqtgraph's own AxisItem opens one on a new QPicture each time its
ticks change (see gradviz.gui.widgets.axes).
"""

from __future__ import annotations

import gc
import math
import sys

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QApplication, QGraphicsView

from gradviz.gui.widgets import axes
from gradviz.gui.widgets.heatmap import HeatmapView

REDRAWS = 200


def _drawn(axis: pg.AxisItem, paint) -> QImage:
    """The axis drawn from scratch by ``paint`` (an AxisItem.paint) into an image."""
    axis.picture = None  # its ticks must be generated again, as after a change
    rect = axis.boundingRect()
    image = QImage(math.ceil(rect.width()), math.ceil(rect.height()), QImage.Format.Format_ARGB32)
    image.fill(0)
    painter = QPainter(image)
    painter.translate(-rect.topLeft())
    paint(axis, painter, None, None)
    painter.end()
    return image


@pytest.fixture
def heatmap(qtbot):
    view = HeatmapView("d_pred")
    view.resize(500, 400)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitExposed(view)
    return view


def test_every_axis_of_the_live_views_is_the_picture_reusing_one(fit_views):
    found = [
        item
        for widget in fit_views.widgets.values()
        for view in widget.findChildren(QGraphicsView)
        for item in view.scene().items()
        if isinstance(item, pg.AxisItem)
    ]
    stock = [a for a in found if not isinstance(a, axes.AxisItem)]
    # 16 plots and colorbars (matrices, gradients, loss, points, Jacobians), 4 sides each.
    assert len(found) >= 4 * 12 and not stock, f"{len(stock)} of {len(found)} axes are stock"
    # Sides shown as pyqtgraph shows them: a plot's left and bottom, a colorbar's four.
    plots = [p.plot for p in fit_views.matrix_panels()]
    plots += [fit_views.widgets["loss"].plot, fit_views.widgets["points"].plot]
    assert all(p.getAxis("left").isVisible() and p.getAxis("bottom").isVisible() for p in plots)
    assert not any(p.getAxis("top").isVisible() or p.getAxis("right").isVisible() for p in plots)
    bar = fit_views.widgets["error"].colorbar
    assert all(bar.getAxis(side).isVisible() for side in axes.SIDES)


def test_colorbar_scale_shows_the_same_ticks_as_pyqtgraph_after_each_level_change(heatmap):
    scale = heatmap.colorbar.axis
    pictures = []
    for top in (1.0, 7.5, 250.0):
        heatmap.set_matrix(np.linspace(0.0, top, 64, dtype=np.float32).reshape(8, 8))
        ours = _drawn(scale, axes.AxisItem.paint)
        assert ours == _drawn(scale, pg.AxisItem.paint)
        pictures.append(ours)
    assert pictures[0] != pictures[1] != pictures[2]  # new levels, new ticks: not a stale copy


def test_redrawing_a_colorbar_scale_does_not_grow_the_count_of_none(heatmap, monkeypatch):
    scale = heatmap.colorbar.axis
    generated = []
    generate = scale.generateDrawSpecs
    monkeypatch.setattr(scale, "generateDrawSpecs", lambda p: generated.append(1) or generate(p))
    rng = np.random.default_rng(0)
    frames = [rng.uniform(0.0, 1.0 + k, size=(40, 40)).astype(np.float32) for k in range(10)]
    app = QApplication.instance()
    heatmap.set_matrix(frames[-1])
    app.processEvents()
    gc.collect()
    before = sys.getrefcount(None)
    for k in range(REDRAWS):
        heatmap.set_matrix(frames[k % len(frames)])  # new levels: the scale draws new ticks
        app.processEvents()
    gc.collect()
    growth = sys.getrefcount(None) - before
    assert len(generated) >= REDRAWS  # the scale really was drawn anew every time
    if sys.version_info >= (3, 12):
        return  # None is immortal from 3.12 on: its count says nothing
    # pyqtgraph's own AxisItem adds 6 per redraw here (1,200); what is left is noise.
    assert abs(growth) < REDRAWS // 10, f"None moved by {growth} over {REDRAWS} redraws"


def test_a_colorbar_is_made_without_the_menu_it_never_shows(qtbot, monkeypatch):
    # pyqtgraph's ColorBarItem builds a ViewBox menu and then destroys it; destroying a menu
    # under a new plot crashed Qt now and then, so none may be built in the first place.
    import importlib

    viewbox_module = importlib.import_module("pyqtgraph.graphicsItems.ViewBox.ViewBox")

    built = []
    real_menu = viewbox_module.ViewBoxMenu
    monkeypatch.setattr(viewbox_module, "ViewBoxMenu", lambda vb: built.append(vb) or real_menu(vb))
    view = HeatmapView("d_pred")
    qtbot.addWidget(view)
    bar = view.colorbar
    assert built == [] and bar.vb.menu is None and not bar.vb.menuEnabled()
    # What ColorBarItem sets up itself is still there: its frame, its scale, no mouse.
    assert bar.axis is bar.getAxis("right") and bar.axis.style["showValues"]
    assert not any(bar.vb.state["mouseEnabled"])
    # A plot asked for a menu still gets one.
    assert axes.PlotItem().vb.menu is not None and len(built) == 1


def test_a_log_axis_under_a_decade_reads_evenly_spaced_values(qtbot):
    """A loss on a plateau spans under a decade: pyqtgraph put one label there or none
    (no power of ten, no 2 ... 9 multiple inside)."""
    plot = axes.PlotItem()
    plot.setLogMode(False, True)
    axis = plot.getAxis("left")

    def labelled(lo: float, hi: float, size: int = 200) -> tuple[list[float], list[str]]:
        levels = axis.tickValues(math.log10(lo), math.log10(hi), size)
        values = [v for _, vs in levels for v in vs]
        return values, axis.tickStrings(values, 1.0, None)

    values, labels = labelled(1.1e-3, 1.9e-3)
    assert labels == ["0.0012", "0.0014", "0.0016", "0.0018"]
    # Each label sits where the axis puts its value: at the value's logarithm.
    np.testing.assert_allclose([10.0**v for v in values], [float(t) for t in labels])
    assert labelled(1.02, 1.3)[1] == ["1.1", "1.2", "1.3"]
    # With two or more 1 ... 9 x 10^k inside, the ticks and labels are pyqtgraph's own.
    values, labels = labelled(2e-3, 8e-3)
    assert labels == ["0.003", "0.004", "0.005", "0.006", "0.007"]
    values, labels = labelled(1e-4, 10.0, 400)
    assert labels == pg.AxisItem.logTickStrings(axis, values, 1.0, None)


def test_log_axis_labels_beyond_the_float_range_read_inf_without_an_error(qtbot, recwarn):
    # A float64 loss near 1e308 puts ticks past the largest float: a label, not a crash.
    plot = axes.PlotItem()
    plot.setLogMode(False, True)
    labels = plot.getAxis("left").tickStrings([300.0, 305.0, 310.0], 1.0, None)
    assert labels[:2] == ["10³⁰⁰", "10³⁰⁵"] and labels[2] == "inf"
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
