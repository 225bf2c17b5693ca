"""Export PNG/SVG of the Graph page: the whole scene (not only what the view shows), as the
plots' exporters write theirs."""

from __future__ import annotations

import os

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsScene

#: Longest side of an exported PNG (px): a 1,000-node graph stays a few MB.
MAX_PNG_SIDE = 8_000


def save_scene(scene: QGraphicsScene, path: str) -> bool:
    """Write ``scene`` to ``path`` (.png or .svg by its suffix); False where it cannot."""
    rect = scene.sceneRect()
    if os.path.splitext(path)[1].lower() == ".svg":
        generator = QSvgGenerator()
        generator.setFileName(path)
        generator.setSize(QSize(int(rect.width()), int(rect.height())))
        generator.setViewBox(QRectF(0, 0, rect.width(), rect.height()))
        generator.setTitle("gradviz graph")
        painter = QPainter(generator)
        try:
            scene.render(painter, QRectF(0, 0, rect.width(), rect.height()), rect)
        finally:
            painter.end()
        return os.path.exists(path)
    scale = min(2.0, MAX_PNG_SIDE / max(rect.width(), rect.height(), 1.0))
    image = QImage(
        max(int(rect.width() * scale), 1), max(int(rect.height() * scale), 1),
        QImage.Format.Format_ARGB32,
    )  # fmt: skip
    image.fill(QColor(Qt.GlobalColor.white))
    painter = QPainter(image)
    try:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        scene.render(painter, QRectF(image.rect()), rect)
    finally:
        painter.end()
    return image.save(path)
