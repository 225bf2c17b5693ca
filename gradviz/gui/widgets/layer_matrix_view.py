"""One Linear layer of the network as heatmaps: its weights, their gradients and the health
of each gradient entry, ``[W | b]`` (row i: output unit i; the last column: the bias).

Opened by a click on a layer in the network diagram (a small window beside the main one);
the owner feeds it the layer of the picture on screen (``show_layer``), so it follows the
timeline and the live run as the diagram does. Hovering any of the three maps reads the
entry's row, column, weight and gradient (``LayerMatrix.entry_words``) in one line under
them; the three maps zoom and pan together.
"""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from gradviz.core.common.health import HEALTH_LABELS, Health
from gradviz.core.nets.layer_matrix import LayerMatrix
from gradviz.gui.widgets.healthmap import HealthMapView
from gradviz.gui.widgets.heatmap import HeatmapView
from gradviz.gui.widgets.panel import RangeLink

HOVER_HINT = "Hover over an entry to read its row, column, weight and gradient."
_X, _Y = "j (input unit; last: bias)", "i (output unit)"
_DASH = Qt.PenStyle.DashLine


class LayerMatrixView(QWidget):
    """Heatmaps of one layer (see the module docstring); a window owned by ``parent``."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)  # a window of its own beside the main one
        self.setObjectName("layer-matrix")
        self.setWindowTitle("Layer gradients")
        self.matrix: LayerMatrix | None = None
        self.layer: int | None = None  # the layer asked for (kept while none is shown)
        self.title = QLabel()
        self.title.setObjectName("layer-title")
        self.title.setWordWrap(True)
        self.weights = HeatmapView("weight", _X, _Y, diverging=True)
        self.grads = HeatmapView("gradient", _X, _Y, diverging=True)
        self.health = HealthMapView("gradient", _X, _Y, legend_columns=3)
        self.grads.nonfinite_legend_shown = False  # the health map beside it names them
        maps = QHBoxLayout()
        for view in (self.weights, self.grads, self.health):
            maps.addWidget(view, stretch=1)
            view.readout.hide()  # one readout for the three, under them
            view.cellHovered.connect(self._on_hovered)
        self._link = RangeLink([self.weights, self.grads, self.health], self)
        # A line before the bias column, so a bias is not read as one more input's weight.
        self.bias_lines = []
        for view in (self.weights, self.grads, self.health):
            line = pg.InfiniteLine(angle=90, pen=pg.mkPen("#dddddd", width=1, style=_DASH))
            line.setZValue(30)
            view.plot.addItem(line, ignoreBounds=True)
            self.bias_lines.append(line)
        self.readout = QLabel(HOVER_HINT)
        self.readout.setObjectName("layer-readout")
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.note = QLabel()
        self.note.setObjectName("layer-note")
        self.note.setWordWrap(True)
        self.note.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.title)
        layout.addLayout(maps, stretch=1)
        layout.addWidget(self.readout)
        layout.addWidget(self.note)
        self.resize(780, 360)

    # ---- what is shown ------------------------------------------------------------------------
    def show_layer(self, layer: int, matrix: LayerMatrix | None, words: str) -> None:
        """Show Linear layer ``layer`` (0 = the first): its ``matrix`` of the picture
        ``words`` names ("step 12"), or, where ``matrix`` is None, ``words`` saying why none
        is drawn (the maps are cleared: they never show another picture's numbers)."""
        self.layer, self.matrix = layer, matrix
        name = f"Linear {layer + 1}"
        if matrix is None:
            self.title.setText(f"{name}: {words}")
            for view in (self.weights, self.grads):
                view.clear()
            self.health.clear()
            self.readout.setText("")
            self.note.hide()
            return
        bias = " and bias" if matrix.has_bias else ""
        worst = HEALTH_LABELS[Health(int(matrix.health.max()))] if matrix.health.size else ""
        self.title.setText(
            f"{name}: {matrix.in_features:,} → {matrix.out_features:,}, weights{bias} and "
            f"their gradients of {words} (worst entry shown: {worst})"
        )
        self.setWindowTitle(f"{name}: weights and gradients")
        self.weights.set_matrix(matrix.weights)
        self.grads.set_matrix(matrix.grads)
        self.health.set_codes(matrix.health, matrix.grads)
        for line in self.bias_lines:
            line.setValue(float(matrix.weight_columns))
            line.setVisible(matrix.has_bias)
        self.note.setText(matrix.elision_words())
        self.note.setVisible(matrix.elided)
        hovered = self.weights._hovered
        if hovered is not None and self._inside(*hovered):
            self._on_hovered(*hovered)
        elif not self.readout.text() or self.readout.text() == HOVER_HINT:
            self.readout.setText(HOVER_HINT)

    def _inside(self, i: int, j: int) -> bool:
        return (
            self.matrix is not None
            and 0 <= i < self.matrix.weights.shape[0]
            and (0 <= j < self.matrix.weights.shape[1])
        )

    @Slot(int, int)
    def _on_hovered(self, i: int, j: int) -> None:
        if self._inside(i, j):
            self.readout.setText(self.matrix.entry_words(i, j))

    # ---- for tests and scripts ----------------------------------------------------------------
    def entry(self, i: int, j: int) -> dict[str, Any]:
        """Entry (i, j) as the maps hold it: weight, gradient (floats) and health (words)."""
        matrix = self.matrix
        return {
            "weight": float(matrix.weights[i, j]),
            "gradient": float(matrix.grads[i, j]),
            "health": HEALTH_LABELS[Health(int(self.health._codes[i, j]))],
            "drawn_weight": float(self.weights._values[i, j]),
            "drawn_gradient": float(self.grads._values[i, j]),
        }

    def readouts(self) -> dict[str, Any]:
        """What the window shows, as data."""
        matrix = self.matrix
        return {
            "layer": None if self.layer is None else self.layer + 1,
            "title": self.title.text(),
            "shape": None if matrix is None else tuple(matrix.weights.shape),
            "health_counts": {HEALTH_LABELS[h]: n for h, n in self.health.counts().items()},
            "note": self.note.text() if self.note.isVisibleTo(self) else "",
            "readout": self.readout.text(),
        }
