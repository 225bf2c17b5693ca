"""Per-point Jacobians d coords_i / d features_i of a network run, live.

When the coordinates come from a network (``FitConfig.net``), every Snapshot carries the
(N, D, F) Jacobians of each point's coordinates with respect to its own input features.
This view shows the selected point's D x F Jacobian and all points at once (N rows of
D*F entries, grouped by coordinate), both on a diverging colormap centred on 0 with a hover
readout. A run with free coordinates has no network to differentiate: the view says so.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QSpinBox,
    QSplitter,
    QStackedLayout,
    QVBoxLayout,
    QWidget,
)

from gradviz.gui.widgets.heatmap import HeatmapView
from gradviz.gui.widgets.panel import format_value

FREE_NOTE = (
    "This run fits free coordinates: there is no network, so there are no per-point "
    "Jacobians d coords_i / d features_i.\n\nChoose coordinate source 'network' in the "
    "setup (e.g. 8-32-3:tanh) and Reset to see them live."
)


class _AllPointsView(HeatmapView):
    """(N, D*F) image: row i is point i's Jacobian, coordinate-major (d, f)."""

    def __init__(self) -> None:
        super().__init__(
            "d coord / d feature", x_label="(d, f)", y_label="i (point)", diverging=True
        )
        self.features = 1

    def _readout(self, i: int, j: int) -> str:
        if self._values is None:
            return ""
        d, f = divmod(j, self.features)
        value = float(self._values[i, j])
        return f"point {i}:  d coord[{d}] / d feature[{f}] = {format_value(value)}"


class _PointView(HeatmapView):
    """(D, F) image: one point's Jacobian."""

    def __init__(self) -> None:
        super().__init__(
            "d coord / d feature", x_label="f (feature)", y_label="d (coordinate)", diverging=True
        )
        self.index_names = ("d", "f")
        self.point = 0

    def _readout(self, i: int, j: int) -> str:
        if self._values is None:
            return ""
        value = float(self._values[i, j])
        return f"point {self.point}:  d coord[{i}] / d feature[{j}] = {format_value(value)}"


class JacobianView(QWidget):
    """The per-point Jacobian dock of the distance-fit lab.

    ``set_jacobians(None)`` shows the free-coordinates note; an (N, D, F) array shows the
    selected point (spin box, or a click on a row of the all-points view, or
    ``select_point``) and every point.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._jacobians: np.ndarray | None = None
        self.note = QLabel(FREE_NOTE)
        self.note.setWordWrap(True)
        self.note.setObjectName("jacobian-note")
        self.note.setStyleSheet("color: #555; padding: 16px;")

        self.point_box = QSpinBox()
        self.point_box.setPrefix("point i = ")
        self.point_box.setToolTip("The point whose D x F Jacobian is shown on the left")
        self.shape_label = QLabel("")
        self.point_view = _PointView()
        self.all_view = _AllPointsView()
        controls = QHBoxLayout()
        controls.setContentsMargins(4, 2, 4, 0)
        controls.addWidget(self.point_box)
        controls.addStretch(1)
        controls.addWidget(self.shape_label)
        self.splitter = splitter = QSplitter()
        splitter.addWidget(self.point_view)
        splitter.addWidget(self.all_view)
        self.live = QWidget()
        live_layout = QVBoxLayout(self.live)
        live_layout.setContentsMargins(0, 0, 0, 0)
        live_layout.addLayout(controls)
        live_layout.addWidget(splitter, stretch=1)

        self.stack = QStackedLayout(self)
        self.stack.addWidget(self.note)
        self.stack.addWidget(self.live)
        self.point_box.valueChanged.connect(self._on_point_changed)
        self.all_view.cellClicked.connect(self._on_row_clicked)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        # Side by side in a wide dock, one above the other in a tall or narrow one.
        wide = event.size().width() > 1.3 * event.size().height()
        orientation = Qt.Orientation.Horizontal if wide else Qt.Orientation.Vertical
        if self.splitter.orientation() != orientation:
            self.splitter.setOrientation(orientation)
            self.splitter.setSizes([2, 3])

    @property
    def jacobians(self) -> np.ndarray | None:
        """The (N, D, F) array on screen, or None (free coordinates)."""
        return self._jacobians

    @property
    def showing_note(self) -> bool:
        return self.stack.currentWidget() is self.note

    def set_jacobians(self, jacobians: np.ndarray | None) -> None:
        """Show an (N, D, F) float32 array, or the note when None."""
        self._jacobians = jacobians
        if jacobians is None:
            self.stack.setCurrentWidget(self.note)
            self.point_view.clear()
            self.all_view.clear()
            return
        n, d, f = jacobians.shape
        self.stack.setCurrentWidget(self.live)
        self.shape_label.setText(f"N = {n} points · D = {d} coordinates · F = {f} features")
        self.point_box.blockSignals(True)
        self.point_box.setMaximum(n - 1)
        self.point_box.blockSignals(False)
        self.all_view.features = f
        self.all_view.set_matrix(np.ascontiguousarray(jacobians.reshape(n, d * f)))
        self._show_point()

    def select_point(self, i: int) -> None:
        self.point_box.setValue(i)

    def clear(self) -> None:
        self.set_jacobians(None)

    def _show_point(self) -> None:
        if self._jacobians is None:
            return
        i = min(self.point_box.value(), len(self._jacobians) - 1)
        self.point_view.point = i
        self.point_view.set_matrix(self._jacobians[i])
        self.all_view.set_marker(None, None)

    @Slot(int)
    def _on_point_changed(self, _i: int) -> None:
        self._show_point()

    @Slot(int, int)
    def _on_row_clicked(self, i: int, _j: int) -> None:
        self.select_point(i)
