"""The Graph page's view: drag to pan, wheel to zoom about the pointer, click a node to
choose it, double-click a module to collapse or expand it."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QGraphicsView

from gradviz.gui.pages.graph.scene import BoxItem, NodeItem

#: Zoom per wheel notch, and its bounds (scale of layout units to pixels).
ZOOM_STEP = 1.15
ZOOM_RANGE = (0.05, 8.0)


class GraphView(QGraphicsView):
    """``nodeClicked(id)``, ``nodeDoubleClicked(id)`` (a node or a module's frame)."""

    nodeClicked = Signal(str)
    nodeDoubleClicked = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("graph-view")
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self.setOptimizationFlag(QGraphicsView.OptimizationFlag.DontSavePainterState, True)
        # Sources on top: a graph shorter than the view starts at its top, not its middle.
        self.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignHCenter)

    def _item_id(self, event) -> str | None:
        for item in self.items(event.position().toPoint()):
            while item is not None and not isinstance(item, (NodeItem, BoxItem)):
                item = item.parentItem()
            if item is not None:
                return item.node_id
        return None

    def mousePressEvent(self, event) -> None:  # noqa: N802 - Qt override
        if event.button() == Qt.MouseButton.LeftButton:
            node_id = self._item_id(event)
            if node_id is not None:
                self.nodeClicked.emit(node_id)
        super().mousePressEvent(event)  # a drag from a node pans too

    def mouseDoubleClickEvent(self, event) -> None:  # noqa: N802 - Qt override
        node_id = self._item_id(event)
        if node_id is not None and event.button() == Qt.MouseButton.LeftButton:
            self.nodeDoubleClicked.emit(node_id)
            return
        super().mouseDoubleClickEvent(event)

    def wheelEvent(self, event) -> None:  # noqa: N802 - Qt override
        notches = event.angleDelta().y() / 120.0
        if not notches:
            return
        factor = ZOOM_STEP**notches
        scale = self.transform().m11() * factor
        if ZOOM_RANGE[0] <= scale <= ZOOM_RANGE[1]:
            self.scale(factor, factor)

    def fit(self) -> None:
        """The whole graph in view, never magnified past 1:1 (a small graph stays legible,
        a large one is shown whole)."""
        scene = self.scene()
        if scene is None:
            return
        self.resetTransform()
        rect = scene.sceneRect()
        view = self.viewport().rect()
        if rect.width() > view.width() or rect.height() > view.height():
            self.fitInView(rect, Qt.AspectRatioMode.KeepAspectRatio)
            if self.transform().m11() < 0.35:  # unreadable: start at the top instead
                self.resetTransform()
                self.scale(0.35, 0.35)
        self.centerOn(rect.center().x(), rect.top() + view.height() / 2 / self.transform().m11())
