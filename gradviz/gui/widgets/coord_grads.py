"""Per-point coordinate gradients (N x D): values beside their Health codes."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QHBoxLayout, QWidget

from gradviz.gui.widgets.healthmap import HealthMapView
from gradviz.gui.widgets.heatmap import HeatmapView
from gradviz.gui.widgets.panel import RangeLink


class CoordGradsView(QWidget):
    """dLoss/dx as a diverging heatmap (row i = point, column d = dimension) and its health.

    The two panels share zoom and pan; clicking either emits ``cellClicked(i, d)``.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.values = HeatmapView(
            "dLoss/dx", x_label="d (dimension)", diverging=True, lock_aspect=False
        )
        # The values beside it name the axis in full; in this narrower panel it would be cut.
        self.health = HealthMapView("dLoss/dx", x_label="d", lock_aspect=False, legend_columns=2)
        for panel in (self.values, self.health):
            panel.index_names = ("i", "d")
        self._link = RangeLink([self.values, self.health], self)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.values, stretch=3)
        layout.addWidget(self.health, stretch=2)
        self._dim = -1

    def set_grads(self, grads: np.ndarray, health: np.ndarray) -> None:
        """Show ``(N, D)`` gradients and their ``(N, D)`` uint8 Health codes."""
        dim = grads.shape[1]
        if dim != self._dim:
            self._dim = dim
            ticks = [[(d + 0.5, str(d)) for d in range(dim)]]
            for panel in (self.values, self.health):
                panel.plot.getAxis("bottom").setTicks(ticks)
        self.values.set_matrix(grads)
        self.health.set_codes(health, grads)

    def clear(self) -> None:
        self._dim = -1
        self.values.clear()
        self.health.clear()
