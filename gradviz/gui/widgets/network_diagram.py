"""The picture of a network in its editor: columns of units, the Linear layers between them,
and, while a run goes, each layer's gradient.

Column ``i`` holds the units of width ``i`` (the input, each hidden layer, the output); a
width above MAX_NODES is drawn as its first units, an ellipsis and its last unit. Linear
layer ``k`` joins column ``k`` to column ``k + 1``: its weight gradient is drawn as the lines
between them, its bias gradient as the rings of column ``k + 1``'s units. Colour: the
health of the tensor's worst entry (the palette of the health maps); thickness: the
tensor's gradient norm on a log scale (``thickness``; NaN and Inf: the thickest). Hovering
a layer or a column shows its numbers as a tooltip; clicking a layer's lines, or the units
its bias feeds, says ``layerClicked`` with the layer (the lab opens its matrices).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from PySide6.QtCore import QEvent, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from gradviz.core.common.health import HEALTH_LABELS, Health
from gradviz.core.nets.layer_gradients import LayerGradient, ParamGradient
from gradviz.gui.widgets.palette import OKABE_ITO

#: Units drawn per column before the rest are elided.
MAX_NODES = 8
#: Gradient norms from 10**LOG_LOW to 10**LOG_HIGH map onto THIN .. THICK pixels.
LOG_LOW, LOG_HIGH = -8.0, 4.0
THIN, THICK = 0.5, 4.5
NEUTRAL = "#9a9a9a"  # lines and rings where no gradient is shown
_RADIUS = 5.0
_TOP, _BOTTOM = 18.0, 6.0  # room for the column titles, and below the last unit


def thickness(norm: float | None) -> float:
    """Pixels of a line or ring for a gradient norm (log scale; non-finite: THICK)."""
    if norm is None:
        return THIN
    if not math.isfinite(norm):
        return THICK
    if norm <= 0.0:
        return THIN
    t = (min(max(math.log10(norm), LOG_LOW), LOG_HIGH) - LOG_LOW) / (LOG_HIGH - LOG_LOW)
    return THIN + t * (THICK - THIN)


def health_colour(gradient: ParamGradient | None) -> str:
    return NEUTRAL if gradient is None else OKABE_ITO[Health(gradient.health)]


def drawn_units(width: int) -> tuple[int, bool]:
    """(units drawn, whether the rest are elided) for a column of ``width`` units."""
    return (width, False) if width <= MAX_NODES else (MAX_NODES - 1, True)


def column_title(column: int, columns: int) -> str:
    if column == 0:
        return "input"
    return "output" if column == columns - 1 else f"hidden {column}"


class NetworkDiagram(QWidget):
    """Columns of units and the layers between them; see the module docstring.

    ``centres`` returns the x of each column's centre in this widget (the editor's controls
    sit under them); evenly spaced when not given.
    """

    layerClicked = Signal(int)  # Linear layer k (0 = the first) clicked

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.widths: list[int] = []
        self.activations: list[str] = []  # after each hidden layer
        self.gradients: list[LayerGradient] | None = None
        self.step_words = ""  # which picture the gradients come from, for the tooltips
        self.centres: Callable[[], list[float]] | None = None
        self.setMinimumHeight(int(_TOP + _BOTTOM + 2 * _RADIUS + (MAX_NODES - 1) * 15))
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMouseTracking(True)

    def set_network(self, widths: list[int], activations: list[str]) -> None:
        self.widths, self.activations = list(widths), list(activations)
        self.update()

    def set_gradients(self, gradients: list[LayerGradient] | None, step_words: str) -> None:
        self.gradients, self.step_words = gradients, step_words
        clickable = Qt.CursorShape.PointingHandCursor if gradients else Qt.CursorShape.ArrowCursor
        self.setCursor(clickable)
        self.update()

    # ---- geometry ---------------------------------------------------------------------------
    def column_x(self) -> list[float]:
        count = len(self.widths)
        if self.centres is not None:
            xs = self.centres()
            if len(xs) == count:
                return xs
        step = self.width() / max(count, 1)
        return [step * (i + 0.5) for i in range(count)]

    def unit_y(self, width: int) -> list[float]:
        """The y of each drawn unit of a column (the ellipsis takes the slot before the last)."""
        shown, elided = drawn_units(width)
        slots = shown + (1 if elided else 0)
        space = self.height() - _TOP - _BOTTOM - 2 * _RADIUS
        gap = min(15.0, space / max(slots - 1, 1))
        top = _TOP + _RADIUS + (space - gap * (slots - 1)) / 2
        ys = [top + gap * k for k in range(slots)]
        return ys[: shown - 1] + [ys[-1]] if elided else ys

    def ellipsis_y(self, width: int) -> float | None:
        shown, elided = drawn_units(width)
        if not elided:
            return None
        ys = self.unit_y(width)
        return (ys[-2] + ys[-1]) / 2

    # ---- painting ---------------------------------------------------------------------------
    def paintEvent(self, event) -> None:  # noqa: N802 - Qt override
        if not self.widths:
            return
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        xs = self.column_x()
        columns = [self.unit_y(w) for w in self.widths]
        for k in range(len(self.widths) - 1):
            self._paint_layer(painter, k, xs, columns)
        for i, ys in enumerate(columns):
            self._paint_column(painter, i, xs[i], ys)
        painter.end()

    def _layer(self, k: int) -> LayerGradient | None:
        return self.gradients[k] if self.gradients and k < len(self.gradients) else None

    def _paint_layer(self, painter: QPainter, k: int, xs: list[float], columns) -> None:
        layer = self._layer(k)
        weight = layer.weight if layer else None
        colour = QColor(health_colour(weight))
        colour.setAlpha(150 if weight else 110)
        pen = QPen(colour, thickness(weight.norm) if weight else THIN)
        pen.setCapStyle(Qt.PenCapStyle.RoundCap)
        painter.setPen(pen)
        for y0 in columns[k]:
            for y1 in columns[k + 1]:
                painter.drawLine(QPointF(xs[k] + _RADIUS, y0), QPointF(xs[k + 1] - _RADIUS, y1))

    def _paint_column(self, painter: QPainter, i: int, x: float, ys: list[float]) -> None:
        text = self.palette().windowText().color()
        font = QFont(self.font())
        font.setPointSizeF(max(6.0, font.pointSizeF() * 0.85))
        painter.setFont(font)
        painter.setPen(text)
        title = column_title(i, len(self.widths))
        painter.drawText(QRectF(x - 50, 0, 100, _TOP), Qt.AlignmentFlag.AlignCenter, title)
        layer = self._layer(i - 1) if i > 0 else None
        bias = layer.bias if layer else None
        ring = QPen(QColor(health_colour(bias)), thickness(bias.norm) if bias else 1.0)
        painter.setPen(ring)
        painter.setBrush(QColor("#e8e8e8") if i == 0 else QColor("#ffffff"))
        for y in ys:
            painter.drawEllipse(QPointF(x, y), _RADIUS, _RADIUS)
        dots = self.ellipsis_y(self.widths[i])
        if dots is not None:
            painter.setPen(text)
            painter.drawText(QRectF(x - 10, dots - 8, 20, 16), Qt.AlignmentFlag.AlignCenter, "⋮")

    # ---- hover ------------------------------------------------------------------------------
    def event(self, event) -> bool:  # noqa: N802 - Qt override
        if event.type() == QEvent.Type.ToolTip:
            text = self.tooltip_at(event.pos().x())
            if text:
                QToolTip.showText(event.globalPos(), text, self)
            else:
                QToolTip.hideText()
            return True
        return super().event(event)

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802 - Qt override
        layer = self.layer_at(event.position().x())
        if event.button() == Qt.MouseButton.LeftButton and layer is not None:
            self.layerClicked.emit(layer)
            event.accept()
            return
        super().mouseReleaseEvent(event)

    def layer_at(self, x: float) -> int | None:
        """The Linear layer at x: the lines between columns k and k + 1, or column k + 1's
        units (its bias rings); None over the input column or outside the network."""
        xs = self.column_x()
        if len(xs) < 2:
            return None
        nearest = min(range(len(xs)), key=lambda i: abs(xs[i] - x))
        if abs(xs[nearest] - x) <= 2 * _RADIUS:
            return nearest - 1 if nearest > 0 else None
        k = nearest if x > xs[nearest] else nearest - 1
        return k if 0 <= k < len(xs) - 1 else None

    def layer_point(self, k: int) -> QPointF:
        """A point on layer ``k``'s lines, midway between its columns (for scripted clicks)."""
        xs = self.column_x()
        return QPointF((xs[k] + xs[k + 1]) / 2, self.height() / 2)

    def tooltip_at(self, x: float) -> str:
        """The hover text at x: a column's units, or the layer between two columns."""
        xs = self.column_x()
        if not xs:
            return ""
        nearest = min(range(len(xs)), key=lambda i: abs(xs[i] - x))
        if abs(xs[nearest] - x) <= 2 * _RADIUS:
            return self.column_tooltip(nearest)
        k = nearest if x > xs[nearest] else nearest - 1
        return self.layer_tooltip(k) if 0 <= k < len(xs) - 1 else ""

    def column_tooltip(self, i: int) -> str:
        width = self.widths[i]
        words = f"{column_title(i, len(self.widths)).capitalize()}: {width:,} units"
        if 0 < i < len(self.widths) - 1:
            words += f", then {self.activations[i - 1]}" if self.activations else ""
        shown, elided = drawn_units(width)
        if elided:
            words += f" ({shown} drawn: the first {shown - 1}, ⋮, the last)"
        layer = self._layer(i - 1) if i > 0 else None
        if layer and layer.bias:
            words += f"\nbias gradient of Linear {i}: {layer.bias.describe()}"
        return words

    def layer_tooltip(self, k: int) -> str:
        """Layer ``k``'s widths and, while shown, its weight and bias gradients."""
        a, b = self.widths[k], self.widths[k + 1]
        words = f"Linear {k + 1}: {a:,} → {b:,}"
        layer = self._layer(k)
        if layer is None:
            return words + "\n(no gradient shown: no run of this network is on screen)"
        lines = [words + (f" ({self.step_words})" if self.step_words else "")]
        lines.append(f"weight gradient: {layer.weight.describe()}")
        lines.append(f"bias gradient: {layer.bias.describe()}" if layer.bias else "no bias")
        lines.append("Click: its weights and gradients, entry by entry")
        return "\n".join(lines)


#: The norms the legend draws, and the health codes it names.
LEGEND_NORMS = (1e-8, 1e-4, 1.0, 1e4)
LEGEND_HEALTH = (Health.FINITE, Health.ZERO, Health.NAN, Health.POS_INF, Health.NEG_INF)


class GradientLegend(QWidget):
    """What the diagram's lines and rings mean: thickness by norm, colour by health."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFixedHeight(40)
        self.setToolTip(
            "Lines: each Linear layer's weight gradient; rings: its bias gradient.\n"
            "Thickness: the gradient's norm on a log scale (NaN and Inf: the thickest);\n"
            "colour: the health of its worst entry, as in the health maps."
        )

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt override
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        text = self.palette().windowText().color()
        metrics = painter.fontMetrics()
        x, y = 2.0, 10.0
        painter.setPen(text)
        x = _label(painter, x, y, "norm (log):")
        for norm in LEGEND_NORMS:
            pen = QPen(QColor(OKABE_ITO[Health.FINITE]), thickness(norm))
            painter.setPen(pen)
            painter.drawLine(QPointF(x + 2, y), QPointF(x + 16, y))
            painter.setPen(text)
            x = _label(painter, x + 20, y, f"{norm:g}")
        x, y = 2.0, 10.0 + metrics.height() + 4
        x = _label(painter, x, y, "worst entry:")
        for code in LEGEND_HEALTH:
            painter.setPen(QPen(QColor(OKABE_ITO[code]), 3.0))
            painter.drawLine(QPointF(x + 2, y), QPointF(x + 12, y))
            painter.setPen(text)
            x = _label(painter, x + 15, y, HEALTH_LABELS[code])
        painter.end()


def _label(painter: QPainter, x: float, y: float, text: str) -> float:
    """Draw ``text`` left-aligned at x, vertically centred on y; the x after it."""
    metrics = painter.fontMetrics()
    painter.drawText(QPointF(x, y + metrics.ascent() / 2 - 1), text)
    return x + metrics.horizontalAdvance(text) + 6
