"""All live views of the distance-fit lab, fed one Snapshot at a time.

The window places ``FitViews.widgets`` into docks (titles in ``FitViews.titles``) and calls
``show_snapshot`` whenever a frame arrives, up to ~30 times a second. Each view redraws only
what changed: the target matrix and target points when the target changes, the loss curve
when the history grows, the gradient mask when its codes change. Views that are hidden
(a tabbed-away dock) draw their latest data when shown.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QEvent, QObject, Signal, Slot
from PySide6.QtWidgets import QWidget

from gradviz.core.snapshot import Snapshot
from gradviz.gui.widgets.coord_grads import CoordGradsView
from gradviz.gui.widgets.healthmap import HealthMapView
from gradviz.gui.widgets.heatmap import HeatmapView
from gradviz.gui.widgets.jacobian_dock import JacobianView
from gradviz.gui.widgets.loss import LossView
from gradviz.gui.widgets.pair import PairView
from gradviz.gui.widgets.panel import MatrixPanel, RangeLink
from gradviz.gui.widgets.points import PointsView

TITLES: dict[str, str] = {
    "distances": "Predicted distances",
    "target": "Target distances",
    "error": "Error (predicted - target)",
    "mask": "Gradient health",
    "coord_grads": "Coordinate gradients",
    "loss": "Loss",
    "points": "Points: predicted vs target",
    "pair": "Selected pair",
    "jacobians": "Per-point Jacobians",
}


def _same_array(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is b
    return a is b or (a.shape == b.shape and np.array_equal(a, b))


class FitViews(QObject):
    """The distance-fit views and the pair selection they share.

    ``widgets`` maps a key (see ``TITLES``) to the widget for its dock. Clicking a cell of
    any distance matrix or of the gradient mask selects the pair (i, j): the pair widget
    shows its numbers, the matrices outline the cell, the scatter rings points i and j, and
    ``pairSelected(i, j)`` is emitted. Zoom and pan are shared by the four N x N matrices.
    """

    pairSelected = Signal(int, int)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.distances_view = HeatmapView("d_pred")
        self.target_view = HeatmapView("d_target")
        self.error_view = HeatmapView("d_pred - d_target", diverging=True)
        self.mask_view = HealthMapView("dLoss/d entry", legend_columns=3)
        self.coord_grads_view = CoordGradsView()
        self.loss_view = LossView()
        self.points_view = PointsView()
        self.pair_view = PairView()
        self.jacobian_view = JacobianView()
        self.widgets: dict[str, QWidget] = {
            "distances": self.distances_view,
            "target": self.target_view,
            "error": self.error_view,
            "mask": self.mask_view,
            "coord_grads": self.coord_grads_view,
            "loss": self.loss_view,
            "points": self.points_view,
            "pair": self.pair_view,
            "jacobians": self.jacobian_view,
        }
        self.titles: dict[str, str] = dict(TITLES)
        self._range_link = RangeLink(self.matrix_panels(), self)
        for panel in self.matrix_panels():
            panel.cellClicked.connect(self._on_cell_clicked)
        self._snapshot: Snapshot | None = None
        self._generation: int | None = None
        self._target: np.ndarray | None = None
        self._pair: tuple[int, int] | None = None
        self._stale: set[str] = set()  # views that skipped snapshots while hidden
        for widget in self.widgets.values():
            widget.installEventFilter(self)

    def matrix_panels(self) -> list[MatrixPanel]:
        """The N x N panels, which share zoom, pan and the selected cell."""
        return [self.distances_view, self.target_view, self.error_view, self.mask_view]

    @property
    def snapshot(self) -> Snapshot | None:
        """The snapshot on screen."""
        return self._snapshot

    @property
    def selected_pair(self) -> tuple[int, int] | None:
        return self._pair

    def show_snapshot(self, snapshot: Snapshot) -> None:
        """Draw ``snapshot`` in every visible view (cheap: unchanged parts are not redrawn).

        Hidden views (a closed or tabbed-away dock) are brought up to date when shown.
        """
        if snapshot.generation != self._generation:
            self._generation = snapshot.generation
            self.loss_view.clear()  # a new run: its history starts over
        self._snapshot = snapshot
        if self._pair is not None and max(self._pair) >= snapshot.n_points:
            self._set_pair(None)  # a smaller point set: the pair is gone
        for key in self.widgets:
            if self.widgets[key].isVisible():
                self._update(key, snapshot)
            else:
                self._stale.add(key)

    def _update(self, key: str, snapshot: Snapshot) -> None:
        """Bring one view up to ``snapshot``."""
        self._stale.discard(key)
        if key == "distances":
            self.distances_view.set_matrix(snapshot.distances)
        elif key == "target":
            if not _same_array(snapshot.target_distances, self._target):
                self._target = snapshot.target_distances
                self.target_view.set_matrix(snapshot.target_distances)
        elif key == "error":
            self.error_view.set_matrix(snapshot.error)
        elif key == "mask":
            self.mask_view.set_codes(snapshot.entry_health, snapshot.entry_grads)
        elif key == "coord_grads":
            self.coord_grads_view.set_grads(snapshot.coord_grads, snapshot.coord_health)
        elif key == "loss":
            self.loss_view.set_history(snapshot.loss_history, snapshot.reference_loss)
        elif key == "points":
            self.points_view.set_points(snapshot.coords, snapshot.target_coords)
        elif key == "jacobians":
            self.jacobian_view.set_jacobians(snapshot.jacobians)
        elif key == "pair" and self._pair is not None:
            self.pair_view.show_pair(snapshot, *self._pair)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.Show and self._snapshot is not None:
            for key, widget in self.widgets.items():
                if widget is watched and key in self._stale:
                    self._update(key, self._snapshot)
        return False

    def clear(self) -> None:
        """Forget the snapshot on screen and empty every view."""
        self._snapshot = None
        self._generation = None
        self._target = None
        self._stale.clear()
        for view in (
            self.distances_view,
            self.target_view,
            self.error_view,
            self.mask_view,
            self.coord_grads_view,
            self.loss_view,
            self.points_view,
            self.jacobian_view,
        ):
            view.clear()
        self._set_pair(None)

    def select_pair(self, i: int, j: int) -> None:
        """Select entry (i, j), as a click on that cell does, and emit ``pairSelected``."""
        self._set_pair((i, j))
        self.jacobian_view.select_point(i)
        self.pairSelected.emit(i, j)

    @Slot(int, int)
    def _on_cell_clicked(self, i: int, j: int) -> None:
        self.select_pair(i, j)

    def _set_pair(self, pair: tuple[int, int] | None) -> None:
        self._pair = pair
        i, j = pair if pair is not None else (None, None)
        for panel in self.matrix_panels():
            panel.set_marker(i, j)
        self.points_view.set_pair(i, j)
        if pair is None or self._snapshot is None:
            self.pair_view.clear()
        else:
            self.pair_view.show_pair(self._snapshot, *pair)
