"""Exporting a plot as PNG, SVG or CSV (pyqtgraph's exporters).

``add_export_menu(plot)`` puts "Export PNG…", "Export SVG…" and "Export data as CSV…" in
the plot's right-click menu.
"""

from __future__ import annotations

import inspect
import os
import weakref
from collections.abc import Callable

import pyqtgraph as pg
import pyqtgraph.exporters as exporters
from PySide6.QtCore import QRectF, QSize
from PySide6.QtGui import QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QFileDialog, QWidget

from gradviz.core.common.errors import GradvizError
from gradviz.gui.widgets.plot_csv import PlotDataCSV, use_for_the_export_dialog

#: File suffix -> (menu text, pyqtgraph exporter, file dialog filter).
FORMATS = {
    ".png": ("Export PNG…", exporters.ImageExporter, "PNG image (*.png)"),
    ".svg": ("Export SVG…", exporters.SVGExporter, "SVG drawing (*.svg)"),
    ".csv": ("Export data as CSV…", PlotDataCSV, "CSV table (*.csv)"),  # the data, not marks
}
#: Save dialog filters by suffix.
FILTERS = {k: v[2] for k, v in FORMATS.items()}


def export_plot(plot: pg.PlotWidget | pg.PlotItem, path: str) -> None:
    """Write ``plot`` to ``path``; the suffix (.png, .svg, .csv) picks the format."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in FORMATS:
        raise GradvizError(f"Export to .png, .svg or .csv, not {suffix or 'no suffix'!r}.")
    item = plot.getPlotItem() if isinstance(plot, pg.PlotWidget) else plot
    own_csv = getattr(item, "export_csv", None)
    if suffix == ".csv" and own_csv is not None:  # a page that writes a table of its own
        own_csv(path)  # (the Runs page: its runs' points, as drawn)
        return
    exporter = FORMATS[suffix][1](item)
    if suffix == ".png":  # at least the size on screen, and never a zero-sized image
        exporter.parameters()["width"] = max(int(item.sceneBoundingRect().width()), 16)
    try:
        exporter.export(path)
    except ValueError:
        if suffix != ".svg":
            raise
        # pyqtgraph's SVG exporter cannot parse the closed paths ("... Z") that recent Qt
        # writes (pyqtgraph issue 3495): draw the plot with Qt's own SVG generator instead.
        _render_svg(item, path)


def _render_svg(item: pg.PlotItem, path: str) -> None:
    """``item``'s area of its scene drawn into an SVG file by QSvgGenerator."""
    rect = item.sceneBoundingRect()
    generator = QSvgGenerator()
    generator.setFileName(path)
    generator.setSize(QSize(int(rect.width()), int(rect.height())))
    generator.setViewBox(QRectF(0, 0, rect.width(), rect.height()))
    generator.setTitle("gradviz plot")
    painter = QPainter(generator)
    try:
        item.scene().render(painter, QRectF(0, 0, rect.width(), rect.height()), rect)
    finally:
        painter.end()


def ask_path(parent: QWidget, suffix: str) -> str:
    """A file name chosen in a save dialog ('' when cancelled), with ``suffix`` added."""
    path, _ = QFileDialog.getSaveFileName(parent, "Export", "", FILTERS[suffix])
    return path if not path or path.lower().endswith(suffix) else path + suffix


def add_export_menu(
    plot: pg.PlotWidget | pg.PlotItem,
    parent: QWidget,
    choose: Callable[[QWidget, str], str] | None = None,
) -> list:
    """Put the export actions into ``plot``'s right-click menu (enabling that menu) and
    return them. ``choose(parent, suffix)`` returns the file name (a save dialog by
    default; '' cancels)."""
    item = plot.getPlotItem() if isinstance(plot, pg.PlotWidget) else plot
    use_for_the_export_dialog()  # pyqtgraph's Export… entry of the same menu writes the same
    item.setMenuEnabled(True)
    menu = item.vb.menu
    menu.addSeparator()
    # Qt holds the actions' slots outside any Python reference cycle, so they refer to the
    # plot, the window and the chooser weakly: otherwise a closed window is never freed.
    refs = (weakref.ref(item), weakref.ref(parent), _weak_callable(choose or ask_path))
    actions = []
    for suffix, (text, _, _) in FORMATS.items():
        action = menu.addAction(text)
        action.triggered.connect(lambda _=False, s=suffix: _export_chosen(refs, s))
        actions.append(action)
    return actions


def _weak_callable(function: Callable) -> Callable[[], Callable | None]:
    if inspect.ismethod(function):
        return weakref.WeakMethod(function)
    return lambda: function


def _export_chosen(refs, suffix: str) -> None:
    item, parent, choose = (ref() for ref in refs)
    if item is None or parent is None or choose is None:
        return
    path = choose(parent, suffix)
    if path:
        export_plot(item, path)
