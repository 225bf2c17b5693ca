"""Per-point coordinate gradients (N x D): values beside their Health codes."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QHBoxLayout, QLabel, QStackedLayout, QVBoxLayout, QWidget

from gradviz.gui.widgets.healthmap import HealthMapView
from gradviz.gui.widgets.heatmap import HeatmapView
from gradviz.gui.widgets.panel import RangeLink

#: What the view says for a snapshot without coordinate gradients (a recording that did
#: not keep them): no legend at all, rather than counts of gradients nobody measured.
NOT_RECORDED = (
    "This recording does not hold the coordinate gradients (recordings made before they "
    "were kept, or with more than 512 points). Gradient health and the first non-finite "
    "step still come from the recorded statistics."
)


class CoordGradsView(QWidget):
    """dLoss/dx as a diverging heatmap (row i = point, column d = dimension) and its health.

    The two panels share zoom and pan; clicking either emits ``cellClicked(i, d)``. Gradients
    of shape ``(0, D)`` mean "not known" (a recording without them): a note replaces the
    panels.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.values = HeatmapView(
            "dLoss/dx", x_label="d (dimension)", diverging=True, lock_aspect=False
        )
        # The health map beside it names the NaN and Inf entries (with counts): the values'
        # own legend row would take the smallest window's last pixels from both maps.
        self.values.nonfinite_legend_shown = False
        # The values beside it name the axis in full; in this narrower panel it would be cut.
        self.health = HealthMapView("dLoss/dx", x_label="d", lock_aspect=False, legend_columns=2)
        for panel in (self.values, self.health):
            panel.index_names = ("i", "d")
        self._link = RangeLink([self.values, self.health], self)
        panels = QWidget()
        column = QVBoxLayout(panels)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(2)
        row = QHBoxLayout()
        row.setSpacing(2)
        row.addWidget(self.values, stretch=3)
        row.addWidget(self.health, stretch=2)
        column.addLayout(row, stretch=1)
        # The health map's legend under both maps: as wide as the dock, in two or three
        # columns. Under the narrow map alone it took six rows, and a small window left the
        # map itself a strip of some 30 px.
        column.addWidget(self.health.legend_box)
        self.note = QLabel(NOT_RECORDED)
        self.note.setObjectName("coord-grads-not-recorded")
        self.note.setWordWrap(True)
        self.stack = QStackedLayout(self)
        self.stack.setContentsMargins(0, 0, 0, 0)
        self.stack.addWidget(panels)
        self.stack.addWidget(self.note)
        self._panels = panels
        self._dim = -1

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self.health.fit_legend()

    @property
    def recorded(self) -> bool:
        """Whether gradients are on screen (False: the not-recorded note)."""
        return self.stack.currentWidget() is self._panels

    def note_text(self) -> str:
        return "" if self.recorded else self.note.text()

    def set_grads(self, grads: np.ndarray, health: np.ndarray) -> None:
        """Show ``(N, D)`` gradients and their ``(N, D)`` uint8 Health codes; ``(0, D)``:
        not known."""
        if grads.shape[0] == 0:
            self.clear()
            self.stack.setCurrentWidget(self.note)
            return
        self.stack.setCurrentWidget(self._panels)
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
        self.stack.setCurrentWidget(self._panels)
