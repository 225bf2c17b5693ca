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
replayed otherwise, exactly as pyqtgraph does. It also spaces its ticks so that their labels
never touch: pyqtgraph picks the spacing from the axis length alone, and a 130 px axis over
200 points read "50100150". ``PlotItem`` and ``ColorBarItem`` are
pyqtgraph's, with such an axis on every side. Use them for every live plot and colorbar.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFontMetrics, QPainter, QPicture
from PySide6.QtWidgets import QApplication

SIDES = ("left", "bottom", "right", "top")


class AxisItem(pg.AxisItem):
    """pyqtgraph's AxisItem, drawing its ticks into the same QPicture every time."""

    def __init__(self, orientation: str, *args, **kwargs) -> None:
        self._label_html: str | None = None  # before pyqtgraph's constructor sets the label
        super().__init__(orientation, *args, **kwargs)
        self._device = QPicture()

    def _updateLabel(self) -> None:  # noqa: N802 - pyqtgraph override
        """As pyqtgraph's, but the label's HTML is laid out again only when it changed:
        pyqtgraph sets it on every range change (~10 times per axis while a window is
        built, 90 axes), and ``setHtml`` was a tenth of building the window."""
        html = self.labelString()
        if html != self._label_html:
            self._label_html = html
            self.label.setHtml(html)
            self._adjustSize()
        self.picture = None
        self.update()

    def tickSpacing(self, minVal, maxVal, size):  # noqa: N802, N803 - pyqtgraph override
        """pyqtgraph's spacing, widened (1, 2, 5 x 10^k) until the labels have room: one
        label's width and a gap along a horizontal axis, a line's height along a vertical
        one."""
        levels = super().tickSpacing(minVal, maxVal, size)
        if not levels or self.logMode or size <= 0 or not maxVal > minVal:
            return levels
        per_unit = size / (maxVal - minVal)  # pixels per data unit
        spacing = levels[0][0]
        if spacing * per_unit >= self.label_room(minVal, maxVal, spacing):
            return levels
        while spacing * per_unit < self.label_room(minVal, maxVal, spacing):
            wider = _next_nice(spacing)
            if _ticks_within(minVal, maxVal, wider) < 3:
                break  # the end ticks' labels are hidden at the edges: keep a middle one
            spacing = wider
        return [(spacing, 0)]

    def tickValues(self, minVal, maxVal, size):  # noqa: N802, N803 - pyqtgraph override
        """pyqtgraph's ticks; on a log axis, ticks whose labels would touch one already
        placed are left out (the 2 ... 9 inside one decade on a short axis read
        "98765432")."""
        levels = super().tickValues(minVal, maxVal, size)
        if not self.logMode or size <= 0 or maxVal == minVal:
            return levels
        per_unit = size / abs(maxVal - minVal)
        room = self.label_room(minVal, maxVal, 1.0)
        placed: list[float] = []  # pixel positions of the labels kept so far
        kept = []
        for spacing, values in levels:
            chosen = []
            for value in values:
                at = value * per_unit
                if all(abs(at - other) >= room for other in placed):
                    chosen.append(value)
                    placed.append(at)
            if chosen:
                kept.append((spacing, chosen))
        return kept

    def logTickValues(self, minVal, maxVal, size, stdTicks):  # noqa: N802, N803 - pyqtgraph override
        """pyqtgraph's powers of ten and their 2 ... 9 multiples; where fewer than two of
        them lie inside (a range under a decade: a loss curve on a plateau, a zoom), ticks
        evenly spaced in value instead (1.2e-3, 1.4e-3, ...), placed at their logarithms.
        pyqtgraph leaves such an axis with one label or none."""
        levels = super().logTickValues(minVal, maxVal, size, stdTicks)
        inside = [v for _, values in levels for v in values if minVal <= v <= maxVal]
        if len(inside) >= 2 or not maxVal > minVal or max(abs(minVal), abs(maxVal)) > 300:
            return levels
        values = _even_ticks(10.0**minVal, 10.0**maxVal)
        return [(None, [math.log10(v) for v in values])] if len(values) >= 2 else levels

    def logTickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph override
        """pyqtgraph's labels (10⁻³, 2·10⁻³) where one significant digit says each value;
        as many digits as the values need otherwise (the even ticks: 0.0012, 0.0014)."""
        with np.errstate(over="ignore"):  # beyond the float range: "inf", not an error
            numbers = (np.power(10.0, np.asarray(values, float)) * scale).tolist()
            digits = _digits_needed(numbers)
            if digits == 1:
                return super().logTickStrings(values, scale, spacing)
        return [f"{x:.{digits}g}" for x in numbers]

    def label_room(self, lo: float, hi: float, spacing: float) -> float:
        """Pixels one tick label needs along the axis, with a gap to the next."""
        metrics = QFontMetrics(self.style["tickFont"] or QApplication.font())
        if self.orientation in ("left", "right"):
            return metrics.height() + 4
        start = math.ceil(lo / spacing) * spacing
        values = [start, start + spacing, hi]
        texts = self.tickStrings(values, self.autoSIPrefixScale, spacing)
        return max((metrics.horizontalAdvance(t) for t in texts), default=0) + 8

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


def _ticks_within(lo: float, hi: float, spacing: float) -> int:
    """How many multiples of ``spacing`` lie in [lo, hi]."""
    return math.floor(hi / spacing) - math.ceil(lo / spacing) + 1


def _even_ticks(lo: float, hi: float, most: int = 5) -> list[float]:
    """Multiples of a 1, 2, 5 x 10^k step in [lo, hi] (lo < hi), at most ``most`` of them."""
    step = 10.0 ** math.floor(math.log10((hi - lo) / most))
    while _ticks_within(lo, hi, step) > most:
        step = _next_nice(step)
    first = math.ceil(lo / step)
    return [k * step for k in range(first, math.floor(hi / step) + 1)]


def _digits_needed(numbers: list[float], most: int = 6) -> int:
    """The fewest significant digits (up to ``most``) that write every number back to
    itself (to a part in 10^9: the ticks carry float rounding)."""
    finite = [x for x in numbers if math.isfinite(x)]
    for digits in range(1, most):
        if all(abs(float(f"{x:.{digits}g}") - x) <= 1e-9 * abs(x) for x in finite):
            return digits
    return most


def _next_nice(spacing: float) -> float:
    """The next of 1, 2, 5, 10, 20, ... x 10^k above ``spacing``."""
    exponent = math.floor(math.log10(spacing))
    for mantissa in (1, 2, 5, 10):
        candidate = mantissa * 10.0**exponent
        if candidate > spacing * (1 + 1e-9):
            return candidate
    return 20 * 10.0**exponent


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


class _PlotWithoutMenu(pg.PlotItem):
    """The PlotItem under pyqtgraph's ColorBarItem, made with ``enableMenu=False``.

    ColorBarItem makes its PlotItem with a menu and then disables it, which builds a whole
    ViewBox menu (a form of a dozen widgets) only to destroy it: a fifth of building a
    heatmap, and the destruction that crashed Qt now and then (see ``PlotItem``)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("enableMenu", False)
        super().__init__(*args, **kwargs)


class ColorBarItem(_OwnAxes, pg.ColorBarItem, _PlotWithoutMenu):
    """pyqtgraph's ColorBarItem with this module's AxisItem on every side (its scale too),
    made without the menu it never shows (``_PlotWithoutMenu`` comes between it and
    PlotItem in the method order, so ColorBarItem's own ``super().__init__()`` reaches
    it)."""
