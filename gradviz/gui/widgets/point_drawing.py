"""A canvas to draw a 2-D or 3-D point set by hand: click to add a point, drag one to move
it, click one to select it and press Delete (or Backspace) to remove it.

3-D points are drawn through a projection, chosen as in the points view (the two principal
axes, or two coordinates), whose axes stay fixed while you draw (a principal-axes view is
fitted when a set is put in or the view is chosen, not after each edit, so the picture does
not turn under the mouse). A click adds a point on the plane through the points' centre
facing the viewer: its depth (the coordinate the view does not show) is the centre's. A drag
moves a point parallel to the view, keeping its depth; another view edits the depth.

Each finished edit (a click that adds, the release of a drag, a removal) says ``edited``
with the (N, D) points, so the run follows the drawing once per gesture, not at every
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
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from gradviz.gui.widgets import geometry
from gradviz.gui.widgets.points import projection_choices
from gradviz.gui.widgets.wheel import wheel_scrolls_past

#: Decimal places kept of a drawn coordinate.
DECIMALS = 4
#: How near (px) a press must be to a point to take it rather than add one.
PICK_PX = 8.0
#: Height of the canvas and its hint (px); in 3-D with the view's box and a longer hint.
HEIGHT, HEIGHT_3D = 270, 310
#: A distance matrix needs two points: a drawing with fewer changes nothing of the run.
MIN_POINTS = 2
HINT_EMPTY = "Click to add points: the run takes them from the second one on."
_DOT, _SELECTED = "#E69F00", "#F0E442"  # the target's colour, the selection's
#: The dimensions a set is drawn in (a set of other D is drawn as its 2-D projection).
DRAWN_DIMS = (2, 3)
HINT_2D = "Click to add one, drag one to move it, click one and press Delete to remove it."
HINT_3D = (
    "Through the view above: a click adds a point on the plane through the points' centre "
    "facing you (at the centre's depth); a drag moves one parallel to the view (another view "
    "changes its depth). Click one and press Delete to remove it."
)


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
    """The drawing canvas (see the module docstring). ``points`` is (N, D) float64, D 2 or 3."""

    edited = Signal(object)  # (N, D) float64 after each finished edit

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)  # Delete reaches it after a click
        self._points = np.zeros((0, 2))
        self.projection = geometry.axis_projection(2, 0, 1)  # D -> the view's 2 axes
        self.selected: int | None = None
        self.projection_box = QComboBox()
        self.projection_box.setObjectName("drawing-projection")
        self.projection_box.setToolTip("The view 3-D points are drawn in (as in the points view)")
        self.projection_box.hide()
        self.projection_box.currentTextChanged.connect(self._on_projection_chosen)
        wheel_scrolls_past(self.projection_box)
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
        self.clear_button = QPushButton("Clear")
        self.clear_button.setObjectName("drawing-clear")
        self.clear_button.setToolTip(
            "Start from an empty canvas (the run keeps its points until you have drawn two)"
        )
        self.clear_button.clicked.connect(self.clear)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.projection_box, stretch=1)
        top.addStretch()
        top.addWidget(self.clear_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(top)
        layout.addWidget(self.view, stretch=1)
        layout.addWidget(self.hint)
        # A fixed height: the setup panel keeps its layout while points are drawn, and the
        # view (aspect locked) keeps its scale under the mouse.
        self.setFixedHeight(HEIGHT)

    @property
    def points(self) -> np.ndarray:
        return self._points.copy()

    @property
    def dim(self) -> int:
        return int(self._points.shape[1])

    def set_points(self, points: np.ndarray) -> None:
        """Show ``points`` (N, D), D in DRAWN_DIMS, and fit the view to them (no ``edited``)."""
        points = np.asarray(points, dtype=np.float64)
        self._points = np.round(points.reshape(len(points), -1), DECIMALS)
        self.selected = None
        self._set_choices()
        self.projection = self._make_projection()
        self._draw()
        self.fit_view()

    def _set_choices(self) -> None:
        choices = projection_choices(self.dim) if self.dim > 2 else []
        shown = [self.projection_box.itemText(k) for k in range(self.projection_box.count())]
        if shown != choices:
            self.projection_box.blockSignals(True)
            self.projection_box.clear()
            self.projection_box.addItems(choices)
            self.projection_box.blockSignals(False)
        self.projection_box.setVisible(bool(choices))
        self.setFixedHeight(HEIGHT_3D if choices else HEIGHT)

    def _make_projection(self) -> geometry.Projection:
        """The view's axes: the two coordinates in 2-D, else the one chosen in the box."""
        choice = self.projection_box.currentText()
        if self.dim == 2 or not choice:
            return geometry.axis_projection(self.dim, 0, min(1, self.dim - 1))
        if choice == "PCA":  # a cleared canvas keeps the axes it had
            enough = len(self._points) >= MIN_POINTS
            return geometry.pca_projection(self._points) if enough else self.projection
        a, b = (int(part.strip()[1:]) for part in choice.split("vs"))
        return geometry.axis_projection(self.dim, a, b)

    def _on_projection_chosen(self, _choice: str) -> None:
        self.projection = self._make_projection()
        self._draw()
        self.fit_view()

    def shown(self) -> np.ndarray:
        """(N, 2) the points as drawn, in the view's coordinates."""
        return self.projection.apply(self._points)

    def fit_view(self) -> None:
        """The points and a margin of a quarter of their span (a unit square around one)."""
        if not len(self._points):
            self.box.setRange(xRange=(-1, 1), yRange=(-1, 1), padding=0)
            return
        shown = self.shown()
        low, high = shown.min(axis=0), shown.max(axis=0)
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
        shown = [self.box.mapViewToScene(QPointF(x, y)) for x, y in self.shown()]
        gaps = [np.hypot(p.x() - scene_pos.x(), p.y() - scene_pos.y()) for p in shown]
        nearest = int(np.argmin(gaps))
        return nearest if gaps[nearest] <= PICK_PX else None

    def _on_point_clicked(self, _item, _points, ev) -> None:
        self.setFocus(Qt.FocusReason.MouseFocusReason)
        hit = self.point_at(ev.scenePos())
        if hit is not None:
            self.select(hit)

    def add_point(self, where: QPointF) -> None:
        """A point at ``where`` (view coordinates) on the plane through the points' centre
        facing the viewer."""
        centre = self._points.mean(axis=0) if len(self._points) else self.projection.mean
        self._points = np.vstack([self._points, self._placed(centre, where)])
        self.selected = len(self._points) - 1
        self._finish()

    def move_point(self, index: int, where: QPointF, finished: bool) -> None:
        """Point ``index`` to ``where`` (view coordinates), parallel to the view."""
        self._points[index] = self._placed(self._points[index], where)
        if finished:
            self._finish()
        else:
            self._draw()

    def clear(self) -> None:
        """An empty canvas in the same D and view; ``edited`` waits for MIN_POINTS points."""
        self._points = np.zeros((0, self.dim))
        self.selected = None
        self._draw()

    def select(self, index: int | None) -> None:
        self.selected = index
        self._draw()

    def remove_selected(self) -> bool:
        """Remove the selected point; False (and the hint says why) where it cannot go."""
        if self.selected is None:
            return False
        if len(self._points) <= MIN_POINTS:
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
        if len(self._points) >= MIN_POINTS:
            self.edited.emit(self.points)

    def _draw(self) -> None:
        brushes = [_SELECTED if k == self.selected else _DOT for k in range(len(self._points))]
        self.scatter.setData(
            pos=self.shown(), brush=[pg.mkBrush(b) for b in brushes], data=np.arange(len(brushes))
        )
        hint = HINT_3D if self.dim > 2 else HINT_2D
        if len(self._points) < MIN_POINTS:
            hint = HINT_EMPTY
        count = len(self._points)
        self.hint.setText(f"{count} point{'' if count == 1 else 's'} in {self.dim}-D. {hint}")

    def readouts(self) -> dict:
        """The points drawn, as data, the selected one and the view they are drawn in."""
        return {
            "points": self._points.tolist(),
            "selected": self.selected,
            "dim": self.dim,
            "view": self.projection_box.currentText() if self.dim > 2 else "x0 vs x1",
        }

    def _placed(self, through: np.ndarray, where: QPointF) -> np.ndarray:
        """The point of the plane through ``through`` (D,) facing the viewer that the view
        draws at ``where``: ``through`` moved along the view's axes only (rounded)."""
        axes, mean = self.projection.axes, self.projection.mean  # (D, 2), (D,)
        target = np.array([where.x(), where.y()], dtype=np.float64)
        moved = through + axes @ (target - (through - mean) @ axes)
        return np.round(moved, DECIMALS)
