"""A canvas to draw a 2-D point set by hand: click to add a point, drag one to move it, click
one to select it and press Delete (or Backspace) to remove it.

Each finished edit (a click that adds, the release of a drag, a removal) says ``edited``
with the (N, 2) points, so the run follows the drawing once per gesture, not at every
mouse move. Coordinates are rounded to ``DECIMALS`` places: a hand cannot place a point
more finely, and the points then read back exactly from the setting they are written in.
The view keeps its range while you draw (a point moved to the edge does not make it jump);
it fits the points when a set is put in from outside.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

#: Decimal places kept of a drawn coordinate.
DECIMALS = 4
#: How near (px) a press must be to a point to take it rather than add one.
PICK_PX = 8.0
#: Height of the canvas and its hint (px).
HEIGHT = 240
_DOT, _SELECTED = "#E69F00", "#F0E442"  # the target's colour, the selection's


class _DrawingBox(pg.ViewBox):
    """The view box whose mouse gestures edit the points of its ``canvas``."""

    def __init__(self, canvas: PointDrawing) -> None:
        super().__init__(enableMenu=False, lockAspect=True)
        self.canvas = canvas
        self.setMouseEnabled(x=False, y=False)  # a drag moves a point, never the view
        self._dragged: int | None = None

    def mouseClickEvent(self, ev) -> None:  # noqa: N802 - pyqtgraph override
        if ev.button() != Qt.MouseButton.LeftButton:
            ev.ignore()
            return
        ev.accept()
        self.canvas.setFocus(Qt.FocusReason.MouseFocusReason)
        hit = self.canvas.point_at(ev.scenePos())
        if hit is None:
            self.canvas.add_point(self.mapSceneToView(ev.scenePos()))
        else:
            self.canvas.select(hit)

    def mouseDragEvent(self, ev, axis=None) -> None:  # noqa: N802 - pyqtgraph override
        if ev.button() != Qt.MouseButton.LeftButton:
            ev.ignore()
            return
        if ev.isStart():
            self._dragged = self.canvas.point_at(ev.buttonDownScenePos())
            if self._dragged is not None:
                self.canvas.select(self._dragged)
        if self._dragged is None:
            ev.ignore()
            return
        ev.accept()
        where = self.mapSceneToView(ev.scenePos())
        self.canvas.move_point(self._dragged, where, finished=ev.isFinish())
        if ev.isFinish():
            self._dragged = None


class PointDrawing(QWidget):
    """The drawing canvas (see the module docstring). ``points`` is (N, 2) float64."""

    edited = Signal(object)  # (N, 2) float64 after each finished edit

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)  # Delete reaches it after a click
        self._points = np.zeros((0, 2))
        self.selected: int | None = None
        self.box = _DrawingBox(self)
        self.view = pg.GraphicsView()
        self.view.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # keys go to the canvas
        self.view.setCentralItem(self.box)
        self.view.setBackground("#1b1b1b")
        self.scatter = pg.ScatterPlotItem(size=9, pen=pg.mkPen("#1b1b1b"), brush=_DOT)
        self.box.addItem(self.scatter)
        # A click on a point reaches the scatter, not the view box: it selects the point.
        self.scatter.sigClicked.connect(self._on_point_clicked)
        self.hint = QLabel(
            "Click to add a point, drag one to move it, click one and press Delete to remove it."
        )
        self.hint.setWordWrap(True)
        self.hint.setObjectName("drawing-hint")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.view, stretch=1)
        layout.addWidget(self.hint)
        # A fixed height: the setup panel keeps its layout while points are drawn, and the
        # view (aspect locked) keeps its scale under the mouse.
        self.setFixedHeight(HEIGHT)

    @property
    def points(self) -> np.ndarray:
        return self._points.copy()

    def set_points(self, points: np.ndarray) -> None:
        """Show ``points`` (N, 2) and fit the view to them (no ``edited``)."""
        self._points = np.round(np.asarray(points, dtype=np.float64).reshape(-1, 2), DECIMALS)
        self.selected = None
        self._draw()
        self.fit_view()

    def fit_view(self) -> None:
        """The points and a margin of a quarter of their span (a unit square around one)."""
        if not len(self._points):
            self.box.setRange(xRange=(-1, 1), yRange=(-1, 1), padding=0)
            return
        low, high = self._points.min(axis=0), self._points.max(axis=0)
        margin = max(float((high - low).max()) * 0.25, 0.5)
        self.box.setRange(
            xRange=(low[0] - margin, high[0] + margin),
            yRange=(low[1] - margin, high[1] + margin),
            padding=0,
        )

    # ---- gestures (the view box calls these) ----------------------------------------------------
    def point_at(self, scene_pos: QPointF) -> int | None:
        """The index of the point within PICK_PX of ``scene_pos`` (the nearest), or None."""
        if not len(self._points):
            return None
        shown = [self.box.mapViewToScene(QPointF(x, y)) for x, y in self._points]
        gaps = [np.hypot(p.x() - scene_pos.x(), p.y() - scene_pos.y()) for p in shown]
        nearest = int(np.argmin(gaps))
        return nearest if gaps[nearest] <= PICK_PX else None

    def _on_point_clicked(self, _item, _points, ev) -> None:
        self.setFocus(Qt.FocusReason.MouseFocusReason)
        hit = self.point_at(ev.scenePos())
        if hit is not None:
            self.select(hit)

    def add_point(self, where: QPointF) -> None:
        self._points = np.vstack([self._points, _rounded(where)])
        self.selected = len(self._points) - 1
        self._finish()

    def move_point(self, index: int, where: QPointF, finished: bool) -> None:
        self._points[index] = _rounded(where)
        if finished:
            self._finish()
        else:
            self._draw()

    def select(self, index: int | None) -> None:
        self.selected = index
        self._draw()

    def remove_selected(self) -> bool:
        """Remove the selected point; False (and the hint says why) where it cannot go."""
        if self.selected is None:
            return False
        if len(self._points) <= 2:
            self.hint.setText("A distance matrix needs at least 2 points: add one first.")
            return False
        self._points = np.delete(self._points, self.selected, axis=0)
        self.selected = None
        self._finish()
        return True

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        if event.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace):
            self.remove_selected()
            event.accept()
            return
        super().keyPressEvent(event)

    def _finish(self) -> None:
        self._draw()
        self.edited.emit(self.points)

    def _draw(self) -> None:
        brushes = [_SELECTED if k == self.selected else _DOT for k in range(len(self._points))]
        self.scatter.setData(
            pos=self._points, brush=[pg.mkBrush(b) for b in brushes], data=np.arange(len(brushes))
        )
        self.hint.setText(
            f"{len(self._points)} points. Click to add one, drag one to move it, click one and "
            "press Delete to remove it."
        )

    def readouts(self) -> dict:
        """The points drawn, as data, and the selected one."""
        return {"points": self._points.tolist(), "selected": self.selected}


def _rounded(where: QPointF) -> np.ndarray:
    return np.round(np.array([where.x(), where.y()], dtype=np.float64), DECIMALS)
