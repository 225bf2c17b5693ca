"""Axes that keep drawing one paint device: pyqtgraph's plot pieces, minus a binding leak.

PySide6 6.11.3 on Python 3.11 (where None is mortal) leaks one reference to None the first
time C++ calls each virtual method that a Qt object made in Python does not override in
Python. A ``QPainter`` opened on a
new ``QPicture``, ``QImage`` or ``QPixmap`` calls 6 of them, so it adds 6 references to None
that are never released; a painter on a device painted on before adds none. pyqtgraph's
``AxisItem.paint`` caches its ticks in a new ``QPicture`` each time they must be drawn again
(a new range, new levels, a resize). A colorbar does that on most frames (its levels follow
the data), so the live views gained 8-10 references to None per frame. A leak is not a
crash, but it hides one: the soak test guards the binding pin by checking that the counts of
True and None stay put, and a steady gain would mask a binding that drops a reference per
frame (PySide6 6.12.0 does, and then aborts). From Python 3.12 None is immortal.

``AxisItem`` here draws into one ``QPicture`` kept for its whole life (opening a painter on
a ``QPicture`` discards what it held), so ticks are still drawn only when they change and
replayed otherwise, exactly as pyqtgraph does. ``PlotItem`` and ``ColorBarItem`` are
pyqtgraph's, with such an axis on every side. Use them for every live plot and colorbar.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QPainter, QPicture

SIDES = ("left", "bottom", "right", "top")


class AxisItem(pg.AxisItem):
    """pyqtgraph's AxisItem, drawing its ticks into the same QPicture every time."""

    def __init__(self, orientation: str, *args, **kwargs) -> None:
        super().__init__(orientation, *args, **kwargs)
        self._device = QPicture()

    def paint(self, p, opt, widget) -> None:  # Qt override
        if self.picture is None:
            # As pyqtgraph's AxisItem.paint, but never on a new device (see the module doc).
            painter = QPainter(self._device)
            try:
                if self.style["tickFont"]:
                    painter.setFont(self.style["tickFont"])
                specs = self.generateDrawSpecs(painter)
                if specs is not None:
                    self.drawPicture(painter, *specs)
            finally:
                painter.end()
            self.picture = self._device
        self.picture.play(p)

    def updateAutoSIPrefix(self) -> None:  # noqa: N802 (pyqtgraph API)
        """No SI prefix on a log axis: pyqtgraph scales its powers of ten by the range's
        largest value ("loss (x1e+18)" over ticks 1 ... 1e-19); its ticks read 10⁻³ as they are."""
        if not self.logMode:
            super().updateAutoSIPrefix()
            return
        self.autoSIPrefixScale, self.labelUnitPrefix = 1.0, ""
        self._updateLabel()


class _OwnAxes:
    """Mixin for PlotItem and its subclasses: sides not given an axis get an ``AxisItem``.

    PlotItem's constructor calls ``setAxisItems`` and builds stock axes for the sides it
    was not given; here those sides get this module's axis, shown or hidden as PlotItem
    would (left and bottom shown, plus the sides the caller passed).
    """

    def setAxisItems(self, axisItems: dict[str, pg.AxisItem] | None = None) -> None:  # noqa: N802, N803 (pyqtgraph API)
        given = dict(axisItems or {})
        # Made as PlotItem makes its own: parented at once, so Qt owns them with the plot.
        added = {
            s: AxisItem(s, parent=self) for s in SIDES if s not in given and s not in self.axes
        }
        super().setAxisItems({**given, **added})
        shown = {"left", "bottom", *given}
        for side in added:
            self.showAxis(side, side in shown)


class PlotItem(_OwnAxes, pg.PlotItem):
    """pyqtgraph's PlotItem with this module's AxisItem on every side.

    A plot without a context menu is made with ``enableMenu=False`` rather than disabled
    afterwards: ``setMenuEnabled(False)`` on a new plot destroys the menu it has just built
    (``menu.setParent(None)``), and that crashed Qt now and then in long test sessions."""


class ColorBarItem(_OwnAxes, pg.ColorBarItem):
    """pyqtgraph's ColorBarItem with this module's AxisItem on every side (its scale too)."""
