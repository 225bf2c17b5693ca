"""The point-set gallery: a thumbnail of every generator, drawn by the generator itself at the
form's N, D and seed, plus "file…" and "drawn"; the one picked is previewed larger, with its
words. "drawn" opens a canvas under the thumbnails on which the points are drawn by hand.

Thumbnails show what ``gradviz.core.lab.pointsets.generate`` makes (no picture is shipped):
the points as they are in 1-D (against their index) and 2-D, on their two principal axes
above (as the points view draws them). A generator that cannot make this D says so and is
not offered. Very large sets are drawn from the first ``MAX_VALUES`` values' worth of rows
(the tooltip says how many), so a thumbnail never costs more than a moment.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import (
    QButtonGroup,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gradviz.core.common.errors import GradvizError
from gradviz.core.lab.pointsets import generate
from gradviz.gui.widgets.geometry import pca_projection
from gradviz.gui.widgets.point_drawing import DRAWN_DIMS, PointDrawing

#: Points generated for a thumbnail at most (rows x D).
MAX_VALUES = 400_000
#: Points drawn in a thumbnail at most (evenly spread over the set).
MAX_DRAWN = 1_500
THUMB, PREVIEW = 38, 64  # pixels
FILE = "file…"
DRAWN = "drawn"
_DOT = "#E69F00"  # the target's colour in the points view


def project(points: np.ndarray) -> np.ndarray:
    """(N, D) points -> (N, 2) as drawn: x against the index in 1-D, raw in 2-D, PCA above."""
    n, dim = points.shape
    if dim == 1:
        return np.column_stack([np.arange(n, dtype=np.float64), points[:, 0]])
    if dim == 2:
        return np.asarray(points, dtype=np.float64)
    return pca_projection(points).apply(points)


def draw_points(points: np.ndarray | None, size: int, words: str = "") -> QPixmap:
    """A square picture of ``points`` (or of ``words`` where there are none)."""
    pixmap = QPixmap(size, size)
    pixmap.fill(QColor("#1b1b1b"))
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    if points is None or not len(points):
        painter.setPen(QColor("#bbbbbb"))
        font = painter.font()
        font.setPointSizeF(max(5.0, font.pointSizeF() * 0.75))
        painter.setFont(font)
        flags = Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap
        painter.drawText(QRectF(2, 2, size - 4, size - 4), flags, words)
        painter.end()
        return pixmap
    xy = project(points)
    step = max(1, len(xy) // MAX_DRAWN)
    xy = xy[::step]
    low, high = xy.min(axis=0), xy.max(axis=0)
    span = float(max((high - low).max(), 1e-12))
    margin = 4.0
    scale = (size - 2 * margin) / span
    centre = (low + high) / 2
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor(_DOT))
    radius = 1.6 if size <= THUMB else 2.2
    for x, y in xy:
        px = size / 2 + (x - centre[0]) * scale
        py = size / 2 - (y - centre[1]) * scale  # y up, as in the points view
        painter.drawEllipse(QPointF(px, py), radius, radius)
    painter.end()
    return pixmap


def thumbnail_points(name: str, n: int, dim: int, seed: int) -> tuple[np.ndarray, str]:
    """The points a thumbnail draws and how they relate to the set (for its tooltip).
    GradvizError where the generator cannot make this N and D."""
    rows = min(n, max(2, MAX_VALUES // max(dim, 1)))
    points = generate(name, rows, dim, seed)
    note = f"{n:,} points in {dim}-D, seed {seed}"
    if rows < n:
        note += f" (the thumbnail draws {rows:,} of them, made the same way)"
    return points, note


class PointSetGallery(QWidget):
    """Thumbnails of ``generators`` (name -> one line) and "file…"; see the module docstring.

    ``picked(name)`` when the user picks a generator; ``fileWanted`` for "file…",
    ``drawnWanted`` for "drawn" (the canvas ``drawing`` then edits the points); the form
    sets what is picked and the points shown with ``show_set``.
    """

    picked = Signal(str)
    fileWanted = Signal()
    drawnWanted = Signal()
    saveWanted = Signal()

    def __init__(self, generators: dict[str, str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.generators = dict(generators)
        self.buttons: dict[str, QToolButton] = {}
        self.notes: dict[str, str] = {}
        self.group = QButtonGroup(self)
        self.group.setExclusive(True)
        grid = QGridLayout()
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(2)
        names = [*self.generators, FILE, DRAWN]
        columns = 5
        for k, name in enumerate(names):
            button = QToolButton()
            button.setObjectName(f"points-{name}")
            button.setText(name)
            button.setCheckable(True)
            button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextUnderIcon)
            button.setIconSize(QSize(THUMB, THUMB))
            button.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
            self.group.addButton(button)
            self.buttons[name] = button
            grid.addWidget(button, k // columns, k % columns)
            button.clicked.connect(lambda _checked=False, name=name: self._on_clicked(name))
        self.buttons[FILE].setIcon(QIcon(draw_points(None, THUMB, "CSV or NPY")))
        self.buttons[FILE].setToolTip("Points from a CSV or NPY file of shape (N, D)")
        self.buttons[DRAWN].setIcon(QIcon(draw_points(None, THUMB, "draw")))
        self.buttons[DRAWN].setToolTip(
            "Points drawn by hand in 2-D, or in 3-D through a view: click to add, drag to "
            "move, Delete to remove"
        )
        self.drawing = PointDrawing()
        self.drawing.setObjectName("points-drawing")
        self.drawing.hide()
        self.preview = QLabel()
        self.preview.setObjectName("points-preview")
        self.preview.setFixedSize(PREVIEW, PREVIEW)
        self.caption = QLabel()
        self.caption.setObjectName("points-caption")
        self.caption.setWordWrap(True)
        self.caption.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.caption.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.save_button = QPushButton("Save points…")
        self.save_button.setObjectName("points-save")
        self.save_button.setToolTip("Save the target points shown here as CSV or NPY")
        self.save_button.clicked.connect(self.saveWanted)
        side = QVBoxLayout()
        side.addWidget(self.caption, stretch=1)
        side.addWidget(self.save_button, alignment=Qt.AlignmentFlag.AlignLeft)
        row = QHBoxLayout()
        row.addWidget(self.preview)
        row.addLayout(side, stretch=1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(4)
        layout.addLayout(grid)
        layout.addWidget(self.drawing)
        layout.addLayout(row)

    def draw_generators(self, n: int, dim: int, seed: int) -> None:
        """Redraw every generator's thumbnail at N = ``n``, D = ``dim`` and ``seed``."""
        for name, words in self.generators.items():
            button = self.buttons[name]
            try:
                points, note = thumbnail_points(name, n, dim, seed)
            except GradvizError as exc:
                button.setIcon(QIcon(draw_points(None, THUMB, "not in this D")))
                button.setEnabled(False)
                button.setToolTip(f"{name}: {words}\n{exc}")
                self.notes[name] = str(exc)
                continue
            button.setEnabled(True)
            button.setIcon(QIcon(draw_points(points, THUMB)))
            button.setToolTip(f"{name}: {words}\n{note}")
            self.notes[name] = note

    def show_set(self, picked: str, points: np.ndarray | None, caption: str) -> None:
        """Mark ``picked`` (a generator name or FILE) and preview ``points`` with ``caption``
        (``points`` None: the caption says why there are none)."""
        button = self.buttons.get(picked)
        if button is not None:
            button.setChecked(True)
        drawn = picked == DRAWN and points is not None and points.shape[1] in DRAWN_DIMS
        if drawn and not np.array_equal(points, self.drawing.points):
            self.drawing.set_points(points)  # put in from outside (not an edit on it)
        self.drawing.setVisible(drawn)
        if drawn:
            self.buttons[DRAWN].setIcon(QIcon(draw_points(points, THUMB)))
        self.preview.setPixmap(draw_points(points, PREVIEW, "no points"))
        self.caption.setText(caption)
        self.save_button.setEnabled(points is not None)

    def _on_clicked(self, name: str) -> None:
        if name == FILE:
            self.fileWanted.emit()
        elif name == DRAWN:
            self.drawnWanted.emit()
        else:
            self.picked.emit(name)

    def readouts(self) -> dict:
        """What the gallery shows, as data."""
        checked = self.group.checkedButton()
        return {
            "picked": next((n for n, b in self.buttons.items() if b is checked), None),
            "offered": [n for n, b in self.buttons.items() if b.isEnabled()],
            "notes": dict(self.notes),
            "caption": self.caption.text(),
            "drawing": self.drawing.readouts() if self.drawing.isVisibleTo(self) else None,
        }
