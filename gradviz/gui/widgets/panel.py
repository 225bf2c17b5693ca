"""The matrix panel shared by the heatmaps: image, hover readout, clicks, zoom and pan.

A panel draws a downsampled copy of its matrix sized to the screen (never more image pixels
than screen pixels) into a row-major ImageItem with explicit levels, so pyqtgraph stays on
its fast path. Row i is drawn top to bottom, column j left to right; one entry of the
full-resolution matrix is one unit of the view, so hover and click positions map straight
back to (i, j) of the full matrix. A display-sized matrix (a Snapshot's ``display_block``
> 1: each cell stands for a block x block square of the full matrix) is drawn over the
full matrix's extent, so axes, hover, clicks and markers all speak full-resolution
indices. Zoomed in, only the visible part (plus a margin) is drawn. A panel that is not
visible (a tabbed-away dock) keeps the latest matrix and draws it when shown again.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QPointF, QRectF, Qt, Signal, Slot
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from gradviz.gui.widgets import arrays, axes

HINT = "hover: read a cell · click: select · double-click: zoom out"
#: A matrix panel's plot (axes included) is never squeezed below this height (px): in the
#: smallest window a map stays a map, not a strip of some 30 px under its legend.
MIN_PLOT_HEIGHT = 96

# Below this many screen pixels a view is not laid out yet; do not downsample for it.
_MIN_PIXELS = 128


def status_label(text: str = "") -> QLabel:
    """A rich-text label that never widens the panel (plain text: ``ElidedLabel``)."""
    label = QLabel(text)
    label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
    label.setMinimumWidth(0)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class ElidedLabel(QLabel):
    """A one-line plain-text label that ends in "…" when its dock is too narrow, and shows
    the whole text as its tooltip then (a cut-off hint or readout reads as a whole)."""

    def __init__(self, text: str = "", help_text: str = "") -> None:
        super().__init__()
        self._full = ""
        self._help = help_text
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.setMinimumWidth(0)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setText(text)

    def text(self) -> str:  # the whole text, not what fits
        return self._full

    def setText(self, text: str) -> None:  # noqa: N802 - Qt name
        self._full = text
        self._fit()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        width = self.contentsRect().width()
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, width)
        super().setText(shown if width > 0 else self._full)
        cut = shown != self._full and width > 0
        tip = "\n\n".join(t for t in (self._full if cut else "", self._help) if t)
        super().setToolTip(tip)


def format_value(value: float) -> str:
    """A matrix entry as text: 4 significant digits, NaN/Inf spelled out."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.4g}"


class MatrixPanel(QWidget):
    """A plot showing one matrix as an image, with hover readout and cell clicks.

    Subclasses fill ``controls`` and implement ``_render`` and ``_readout``.
    """

    cellClicked = Signal(int, int)  # (row i, column j) of the full matrix
    cellHovered = Signal(int, int)

    def __init__(
        self,
        x_label: str,
        y_label: str,
        lock_aspect: bool = False,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._shape: tuple[int, int] = (0, 0)  # of the matrix held (display cells)
        self._block = 1  # full-resolution entries per side of one held cell
        self._extent: tuple[int, int] = (0, 0)  # the full matrix's rows and columns
        self._factors: tuple[int, int] = (1, 1)
        self._region: tuple[int, int, int, int] = (0, 0, 0, 0)  # rows r0:r1, columns c0:c1
        self._dirty = False
        self._hovered: tuple[int, int] | None = None
        self._fit_whole = True  # show the whole matrix until the user zooms or pans
        self._reshaping = False
        self.index_names = ("i", "j")  # how the hover readout names a row and a column

        self.controls = QHBoxLayout()
        self.controls.setContentsMargins(0, 0, 0, 0)
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setMinimumHeight(MIN_PLOT_HEIGHT)
        self.graphics.ci.setContentsMargins(2, 2, 2, 2)
        self.plot = axes.PlotItem(enableMenu=False)
        self.graphics.addItem(self.plot)
        self.plot.invertY(True)
        self.plot.setAspectLocked(lock_aspect)
        self.plot.setLabel("bottom", x_label)
        self.plot.setLabel("left", y_label)
        for side in ("left", "bottom"):
            # Ticks outside the image: axes then never need repainting when the image does.
            self.plot.getAxis(side).setStyle(tickLength=5)
        self.plot.getAxis("left").setWidth(52)
        self.view: pg.ViewBox = self.plot.getViewBox()
        self.view.disableAutoRange()
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.marker = pg.ScatterPlotItem(
            size=14, symbol="s", pen=pg.mkPen("w", width=2), brush=None, pxMode=True
        )
        self.marker.setZValue(20)
        self.plot.addItem(self.marker)
        self.plot.hideButtons()  # autorange would follow every frame; double-click instead
        self.readout = ElidedLabel(
            HINT,
            "Hover over a cell to read (i, j) and its value; click it to select the pair;\n"
            "mouse wheel or drag to zoom and pan (all matrices follow); double-click: zoom out.",
        )

        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(2)
        layout.addLayout(self.controls)
        layout.addWidget(self.graphics, stretch=1)
        layout.addWidget(self.readout)

        scene = self.graphics.scene()
        scene.sigMouseMoved.connect(self._on_mouse_moved)
        scene.sigMouseClicked.connect(self._on_mouse_clicked)
        self.view.sigRangeChanged.connect(self._on_view_changed)
        self.view.sigResized.connect(self._on_view_resized)
        self.view.sigRangeChangedManually.connect(self._on_user_zoomed)

    # -- what subclasses provide ------------------------------------------------------------
    def _render(self, ky: int, kx: int) -> None:
        raise NotImplementedError

    def _readout(self, i: int, j: int) -> str:
        raise NotImplementedError

    # -- shared machinery -------------------------------------------------------------------
    @property
    def factors(self) -> tuple[int, int]:
        """Block size (rows, columns) of the image currently drawn."""
        return self._factors

    @property
    def block(self) -> int:
        """Full-resolution entries per side of one cell of the matrix held (1: full size)."""
        return self._block

    @property
    def extent(self) -> tuple[int, int]:
        """Rows and columns of the full-resolution matrix (what the axes count)."""
        return self._extent

    def _set_shape(
        self, shape: tuple[int, int], block: int = 1, extent: tuple[int, int] | None = None
    ) -> None:
        """Remember the held matrix's shape, its block and the full matrix's ``extent``
        (default: shape x block); a new extent resets the view to the whole matrix."""
        extent = extent or (shape[0] * block, shape[1] * block)
        self._block = max(1, int(block))
        changed = extent != self._extent
        self._shape = shape
        self._extent = extent
        if changed:
            self._hovered = None  # a cell of the old matrix may not exist in the new one
            self.readout.setText("")
            self._fit_whole = True
            self._reshaping = True  # the caller draws next; the range change must not
            try:
                self.show_whole()
            finally:
                self._reshaping = False

    def follow_range(self, x_range: tuple[float, float], y_range: tuple[float, float]) -> None:
        """Show exactly this range, as the user would by zooming (used by RangeLink)."""
        self._fit_whole = False
        self.view.setRange(xRange=x_range, yRange=y_range, padding=0)

    def show_whole(self) -> None:
        """Zoom out to the whole matrix."""
        rows, cols = self._extent
        self.view.setRange(xRange=(0, max(cols, 1)), yRange=(0, max(rows, 1)), padding=0.02)

    def _request_draw(self) -> None:
        if self.isVisible():
            self._draw()
        else:
            self._dirty = True

    def _draw(self) -> None:
        self._dirty = False
        if self._shape[0] == 0 or self._shape[1] == 0:
            return
        self._factors = self._wanted_factors()
        self._region = self._wanted_region(*self._factors)
        self._render(*self._factors)
        if self._hovered is not None:  # the value under the resting pointer changed
            self.readout.setText(self._readout(*self._hovered))

    def _cell_range(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """The view's x and y ranges in held cells (view units / block)."""
        (x0, x1), (y0, y1) = self.view.viewRange()
        b = self._block
        return (x0 / b, x1 / b), (y0 / b, y1 / b)

    def _wanted_factors(self) -> tuple[int, int]:
        """Block sizes that keep at least one image pixel per screen pixel of the view."""
        rows, cols = self._shape
        ratio = self.devicePixelRatioF()
        width = max(self.view.width() * ratio, _MIN_PIXELS)
        height = max(self.view.height() * ratio, _MIN_PIXELS)
        (x0, x1), (y0, y1) = self._cell_range()
        span_x = min(x1, cols) - max(x0, 0)
        span_y = min(y1, rows) - max(y0, 0)
        return arrays.display_factor(span_y, height), arrays.display_factor(span_x, width)

    def _wanted_region(self, ky: int, kx: int) -> tuple[int, int, int, int]:
        """Rows and columns worth drawing: the visible ones plus half a view on each side.

        Zoomed in on a big matrix, only this part is downsampled and painted; panning
        within the margin needs no redraw. Starts are aligned to the blocks, so blocks
        do not shift while panning.
        """
        rows, cols = self._shape
        (x0, x1), (y0, y1) = self._cell_range()
        mx, my = (x1 - x0) / 2, (y1 - y0) / 2
        r0 = max(0, math.floor(y0 - my)) // ky * ky
        c0 = max(0, math.floor(x0 - mx)) // kx * kx
        r1 = min(rows, max(r0 + 1, math.ceil(y1 + my)))
        c1 = min(cols, max(c0 + 1, math.ceil(x1 + mx)))
        return min(r0, rows - 1), r1, min(c0, cols - 1), c1

    def _needs_redraw(self) -> bool:
        """True when the zoom changed the block size or panned beyond the drawn region."""
        factors = self._wanted_factors()
        if factors != self._factors:
            return True
        rows, cols = self._shape
        r0, r1, c0, c1 = self._region
        (x0, x1), (y0, y1) = self._cell_range()
        return (
            (r0 > 0 and y0 < r0)
            or (c0 > 0 and x0 < c0)
            or (r1 < rows and y1 > r1)
            or (c1 < cols and x1 > c1)
        )

    def _visible_part(self, matrix: np.ndarray) -> np.ndarray:
        """The rows and columns of ``matrix`` in the drawn region (a view, no copy)."""
        r0, r1, c0, c1 = self._region
        return matrix[r0:r1, c0:c1]

    def _place_image(self, item: pg.ImageItem, ky: int, kx: int, shown: np.ndarray) -> None:
        """Put a downsampled image of the drawn region where its entries are: one
        full-resolution entry is one view unit, row i at y = i, column j at x = j (a held
        cell covers ``block`` units)."""
        r0, _, c0, _ = self._region
        b = self._block
        width, height = shown.shape[1] * kx * b, shown.shape[0] * ky * b
        if b > 1:  # the last display cell may stand for fewer than b entries: end at N
            rows, cols = self._extent
            width, height = min(width, cols - c0 * b), min(height, rows - r0 * b)
        item.setRect(QRectF(float(c0 * b), float(r0 * b), float(width), float(height)))

    def showEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        if self._dirty:
            self._draw()

    @Slot(object)
    def _on_view_resized(self, _view) -> None:
        if self._fit_whole and self._shape[0]:
            self.show_whole()  # a new size: the matrix should still fill the view
        self._on_view_changed()

    @Slot(object)
    def _on_user_zoomed(self, _mask) -> None:
        self._fit_whole = False

    def _on_view_changed(self, *args) -> None:
        if self._reshaping or not self.isVisible() or not self._shape[0]:
            return
        if self._needs_redraw():
            self._draw()

    def _cell_at(self, scene_pos: QPointF) -> tuple[int, int] | None:
        """The full-resolution entry (i, j) under ``scene_pos``, or None."""
        rows, cols = self._extent
        if not rows or not self.view.sceneBoundingRect().contains(scene_pos):
            return None
        p = self.view.mapSceneToView(scene_pos)
        i, j = math.floor(p.y()), math.floor(p.x())
        if 0 <= i < rows and 0 <= j < cols:
            return i, j
        return None

    def _cell_name(self, i: int, j: int) -> str:
        row, col = self.index_names
        return f"{row} = {i}, {col} = {j}"

    def held_cell(self, i: int, j: int) -> tuple[int, int]:
        """The cell of the held (maybe display-sized) matrix that shows entry (i, j)."""
        return i // self._block, j // self._block

    def cell_scene_pos(self, i: int, j: int) -> QPointF:
        """Scene position of the centre of cell (i, j) (for tests and scripted clicks)."""
        return self.view.mapViewToScene(QPointF(j + 0.5, i + 0.5))

    @Slot(object)
    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        cell = self._cell_at(scene_pos)
        self._hovered = cell
        if cell is None:
            return
        self.readout.setText(self._readout(*cell))
        self.cellHovered.emit(*cell)

    @Slot(object)
    def _on_mouse_clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        cell = self._cell_at(event.scenePos())
        if cell is None:
            return
        if event.double():
            self._fit_whole = True
            self.show_whole()
            self.view.sigRangeChangedManually.emit([True, True])  # linked panels follow
        else:
            self.cellClicked.emit(*cell)

    def set_marker(self, i: int | None, j: int | None) -> None:
        """Outline cell (i, j), or nothing when i is None."""
        if i is None or j is None:
            self.marker.setData([], [])
        else:
            self.marker.setData([j + 0.5], [i + 0.5])

    def show_exact_readout(self, i: int, j: int, text: str) -> None:
        """Replace the readout by ``text`` (exact values that arrived for entry (i, j)) if
        the pointer still rests on (i, j)."""
        if self._hovered == (i, j):
            self.readout.setText(text)

    def hover_cell(self, i: int, j: int) -> str:
        """The readout text shown when the pointer rests on cell (i, j)."""
        return self._readout(i, j)


class RangeLink(QObject):
    """Keeps the same view range (zoom and pan) on several panels.

    pyqtgraph's own ``setXLink`` lines views up on screen, which shifts the range of panels
    of different sizes or places (docks); here every panel shows the same rows and columns.
    """

    def __init__(self, panels: list[MatrixPanel], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._panels = list(panels)
        self._busy = False
        for panel in self._panels:
            panel.view.sigRangeChangedManually.connect(self._on_range_changed)

    @Slot(object)
    def _on_range_changed(self, _mask) -> None:
        if self._busy:
            return
        source = next((p for p in self._panels if p.view is self.sender()), None)
        if source is None:
            return
        (x0, x1), (y0, y1) = source.view.viewRange()
        self._busy = True
        try:
            for panel in self._panels:
                if panel is not source:
                    panel.follow_range((x0, x1), (y0, y1))
        finally:
            self._busy = False
