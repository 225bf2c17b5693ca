"""Scatter of predicted against target points, predicted aligned to the target for viewing."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Slot
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QVBoxLayout, QWidget

from gradviz.gui.widgets import axes, geometry
from gradviz.gui.widgets.panel import ElidedLabel

_TARGET_COLOUR = "#E69F00"
_PRED_COLOUR = "#56B4E9"
#: The prediction's name in the legend, aligned onto the target (the align box) or as it is.
PREDICTED_NAMES = {True: "predicted (aligned)", False: "predicted"}
_PICK_COLOUR = "#F0E442"


def projection_choices(dim: int) -> list[str]:
    """Names offered for drawing ``dim``-dimensional points in 2-D."""
    if dim <= 1:
        return ["x0 vs index"]
    pairs = [f"x{a} vs x{b}" for a in range(dim) for b in range(a + 1, dim)]
    return (["PCA"] if dim > 2 else []) + pairs


class PointsView(QWidget):
    """Target points (orange rings) and aligned predicted points (blue dots).

    Predicted points are moved onto the target by a rigid Procrustes fit (rotation,
    reflection, translation; no scaling), which changes no distance. Points with more than
    two dimensions are shown on two chosen coordinates or on the target's two principal axes.
    Thin lines join each predicted point to its target (optional).
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._coords: np.ndarray | None = None
        self._target: np.ndarray | None = None
        self._projection: geometry.Projection | None = None
        self._aligned: np.ndarray | None = None
        self._pair: tuple[int, int] | None = None

        self.projection_box = QComboBox()
        self.projection_box.setToolTip("How points with more than two dimensions are drawn")
        self.projection_box.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.projection_box.setMinimumContentsLength(8)
        self.align_box = QCheckBox("align")
        self.align_box.setChecked(True)
        self.align_box.setToolTip(
            "Align the prediction onto the target (Procrustes: rotate, reflect, translate)"
        )
        self.links_box = QCheckBox("residuals")
        self.links_box.setChecked(True)
        self.links_box.setToolTip("Join each predicted point to its target point")
        controls = QHBoxLayout()
        controls.setContentsMargins(0, 0, 0, 0)
        controls.addWidget(self.projection_box)
        controls.addWidget(self.align_box)
        controls.addWidget(self.links_box)
        controls.addStretch(1)

        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.ci.setContentsMargins(2, 2, 2, 2)
        # The legend in a row above the plot: drawn over it, it hid the points in its corner.
        self.legend = pg.LegendItem(labelTextSize="8pt", colCount=2)
        self.graphics.addItem(self.legend, row=0, col=0)
        self.plot = axes.PlotItem(enableMenu=False)
        self.graphics.addItem(self.plot, row=1, col=0)
        self.plot.setAspectLocked(True)
        # No grid: a grid is painted by the axes, which would then repaint on every frame.
        self.plot.disableAutoRange()
        self.links = pg.PlotCurveItem(pen=pg.mkPen(200, 200, 200, 70), connect="pairs")
        self.plot.addItem(self.links)
        self.target_item = pg.ScatterPlotItem(
            size=7, pen=pg.mkPen(_TARGET_COLOUR, width=1.2), brush=None, name="target"
        )
        self.pred_item = pg.ScatterPlotItem(
            size=5, pen=None, brush=pg.mkBrush(_PRED_COLOUR), name=PREDICTED_NAMES[True]
        )
        self.pick_item = pg.ScatterPlotItem(
            size=16, symbol="o", pen=pg.mkPen(_PICK_COLOUR, width=2.5), brush=None
        )
        self.pick_item.setZValue(10)
        for item in (self.target_item, self.pred_item, self.pick_item):
            self.plot.addItem(item)
        self.legend.addItem(self.target_item, "target")
        self.legend.addItem(self.pred_item, PREDICTED_NAMES[True])
        self._pred_label = self.legend.items[-1][1]  # renamed with the align box
        self.pick_labels = [pg.TextItem(color=_PICK_COLOUR, anchor=(0, 1)) for _ in range(2)]
        for label in self.pick_labels:
            label.setZValue(11)
            self.plot.addItem(label, ignoreBounds=True)
        self.info = ElidedLabel()  # ends in … where the dock is too narrow

        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(2)
        layout.addLayout(controls)
        layout.addWidget(self.graphics, stretch=1)
        layout.addWidget(self.info)

        self.projection_box.currentTextChanged.connect(self._on_projection_changed)
        self.align_box.toggled.connect(self._on_option_changed)
        self.links_box.toggled.connect(self._on_option_changed)

    # -- public -----------------------------------------------------------------------------
    def set_points(self, coords: np.ndarray, target: np.ndarray) -> None:
        """Show ``(N, D)`` predicted ``coords`` against ``(N, D)`` ``target``."""
        target_changed = self._target is None or not (
            target is self._target
            or (target.shape == self._target.shape and np.array_equal(target, self._target))
        )
        self._coords = coords
        if target_changed:
            self._target = target
            self._set_choices(target.shape[1])
            self._projection = self._make_projection()
        self._redraw(target_changed)

    def clear(self) -> None:
        self._coords = self._target = self._projection = self._aligned = None
        self._pair = None
        for item in (self.target_item, self.pred_item, self.pick_item):
            item.setData([], [])
        self.links.setData([], [])
        for label in self.pick_labels:
            label.setText("")
        self.info.setText("")

    def set_pair(self, i: int | None, j: int | None) -> None:
        """Highlight points i and j (predicted and target), or nothing when i is None."""
        self._pair = None if i is None or j is None else (i, j)
        self._draw_pair()

    def aligned_points(self) -> np.ndarray | None:
        """``(N, D)`` predicted points after the alignment in use."""
        return self._aligned

    def highlighted(self) -> np.ndarray:
        """``(K, 2)`` view positions of the highlighted markers."""
        x, y = self.pick_item.getData()
        return np.column_stack([x, y]) if x is not None else np.zeros((0, 2))

    # -- drawing ----------------------------------------------------------------------------
    def _set_choices(self, dim: int) -> None:
        choices = projection_choices(dim)
        if [self.projection_box.itemText(k) for k in range(self.projection_box.count())] == (
            choices
        ):
            return
        self.projection_box.blockSignals(True)
        self.projection_box.clear()
        self.projection_box.addItems(choices)
        self.projection_box.blockSignals(False)
        self.projection_box.setEnabled(len(choices) > 1)

    def _make_projection(self) -> geometry.Projection | None:
        if self._target is None:
            return None
        dim = self._target.shape[1]
        choice = self.projection_box.currentText()
        if dim <= 1:
            return None
        if choice == "PCA":
            return geometry.pca_projection(self._target)
        a, b = (int(part.strip()[1:]) for part in choice.split("vs"))
        return geometry.axis_projection(dim, a, b)

    def _to_2d(self, points: np.ndarray) -> np.ndarray:
        if self._projection is None:  # one dimension: value against index
            return np.column_stack([points[:, 0], np.arange(len(points), dtype=np.float64)])
        return self._projection.apply(points)

    def _redraw(self, target_changed: bool) -> None:
        if self._coords is None or self._target is None:
            return
        if self.align_box.isChecked():
            self._aligned = geometry.rigid_procrustes(self._coords, self._target).apply(
                self._coords
            )
        else:
            self._aligned = np.asarray(self._coords, dtype=np.float64)
        target_2d = self._to_2d(self._target)
        pred_2d = self._to_2d(self._aligned)
        if target_changed:
            shown = _finite_rows(target_2d)
            self.target_item.setData(pos=shown)
            if len(shown):
                # A range fixed by the target: an autoranging plot would rescale (and repaint
                # its axes) on every frame. The aligned prediction lands near the target.
                lo, hi = shown.min(axis=0), shown.max(axis=0)
                self.plot.setRange(xRange=(lo[0], hi[0]), yRange=(lo[1], hi[1]), padding=0.08)
            labels = self._projection.labels if self._projection is not None else ("x0", "index")
            self.plot.setLabel("bottom", labels[0])
            self.plot.setLabel("left", labels[1])
        self.pred_item.setData(pos=_finite_rows(pred_2d))
        if self.links_box.isChecked():
            both = np.empty((2 * len(pred_2d), 2))
            both[0::2], both[1::2] = pred_2d, target_2d
            keep = np.isfinite(both).all(axis=1).reshape(-1, 2).all(axis=1).repeat(2)
            self.links.setData(both[keep, 0], both[keep, 1])
        else:
            self.links.setData([], [])
        bad = int(len(pred_2d) - np.isfinite(pred_2d).all(axis=1).sum())
        self.info.setText(f"{bad:,} predicted points are not finite (not drawn)" if bad else "")
        self._target_2d, self._pred_2d = target_2d, pred_2d
        self._draw_pair()

    def _draw_pair(self) -> None:
        if self._pair is None or self._aligned is None:
            self.pick_item.setData([], [])
            for label in self.pick_labels:
                label.setText("")
            return
        n = len(self._pred_2d)
        picks = [k for k in self._pair if 0 <= k < n]
        pos = np.concatenate([self._pred_2d[picks], self._target_2d[picks]])
        self.pick_item.setData(pos=_finite_rows(pos))
        for label, k in zip(self.pick_labels, self._pair, strict=True):
            p = self._pred_2d[k] if 0 <= k < n else np.array([np.nan, np.nan])
            if np.isfinite(p).all():
                label.setText(str(k))
                label.setPos(float(p[0]), float(p[1]))
            else:
                label.setText("")

    @Slot(str)
    def _on_projection_changed(self, _name: str) -> None:
        self._projection = self._make_projection()
        self._redraw(target_changed=True)

    @Slot(bool)
    def _on_option_changed(self, _on: bool) -> None:
        name = PREDICTED_NAMES[self.align_box.isChecked()]
        self._pred_label.setText(name)
        self.pred_item.opts["name"] = name  # the column's name in an exported CSV too
        self._redraw(target_changed=False)

    def legend_names(self) -> list[str]:
        """The legend's names, as it reads."""
        return [label.text for _sample, label in self.legend.items]


def _finite_rows(points: np.ndarray) -> np.ndarray:
    return points[np.isfinite(points).all(axis=1)]
