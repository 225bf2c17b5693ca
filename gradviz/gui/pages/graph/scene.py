"""The Graph page's drawing: a QGraphicsScene of node boxes, module frames and the edges,
built once per layout; colours, marks and dimming change on the items in place.

Every edge is one path (a single item for the whole graph), so a 1,000-node graph stays a
few thousand items and panning repaints only what the view shows.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QPainterPath, QPen
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsPathItem,
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
)

from gradviz.core.graph.layout import GraphLayout
from gradviz.core.graph.model import ModelGraph

#: Nodes without gradients (operations, inputs, modules without tensors).
NO_HEALTH = "#d9d9d9"
EDGE_COLOUR = "#7a7a7a"
BOX_COLOUR = "#8c8c8c"
#: The origin of the first non-finite value, and the nodes it spread to.
ORIGIN_COLOUR = "#b03a2e"
SPREAD_COLOUR = "#D55E00"
SELECTED_COLOUR = "#000000"


def _describe_on_hover(item) -> None:
    """The hovered item's line as its tooltip (and in the page's readout)."""
    scene = item.scene()
    if isinstance(scene, GraphScene):
        item.setToolTip(scene.describe(item.node_id))


class NodeItem(QGraphicsRectItem):
    """One drawn node (its id; the scene describes it on hover)."""

    def __init__(self, node_id: str, rect: QRectF, label: str) -> None:
        super().__init__(rect)
        self.node_id = node_id
        self.setAcceptHoverEvents(True)
        self.text = QGraphicsSimpleTextItem(label, self)
        font = QFont()
        font.setPointSizeF(8.0)
        self.text.setFont(font)
        bounds = self.text.boundingRect()
        self.text.setPos(
            rect.center().x() - bounds.width() / 2, rect.center().y() - bounds.height() / 2
        )
        self.setZValue(2)

    def hoverEnterEvent(self, event) -> None:  # noqa: N802 - Qt override
        _describe_on_hover(self)
        super().hoverEnterEvent(event)


class BoxItem(QGraphicsRectItem):
    """The frame of an expanded module around the nodes inside it."""

    def __init__(self, node_id: str, rect: QRectF, label: str) -> None:
        super().__init__(rect)
        self.node_id = node_id
        self.setAcceptHoverEvents(True)
        self.setPen(QPen(QColor(BOX_COLOUR), 1.0, Qt.PenStyle.DashLine))
        self.setBrush(QBrush(Qt.BrushStyle.NoBrush))
        self.text = QGraphicsSimpleTextItem(label, self)
        font = QFont()
        font.setPointSizeF(7.0)
        self.text.setFont(font)
        self.text.setBrush(QColor("#555555"))
        self.text.setPos(rect.left() + 2, rect.top() - self.text.boundingRect().height())
        self.setZValue(0)

    def hoverEnterEvent(self, event) -> None:  # noqa: N802 - Qt override
        _describe_on_hover(self)
        super().hoverEnterEvent(event)


class GraphScene(QGraphicsScene):
    """Items for one laid-out graph: ``nodes`` and ``boxes`` by node id."""

    def __init__(
        self, graph: ModelGraph, layout: GraphLayout, hovered: Callable, parent=None
    ) -> None:
        super().__init__(parent)  # owned by the page: it dies with it, on the GUI thread
        self.graph, self.layout = graph, layout
        # Weakly: the items must not keep the page alive (the scene is Qt's to delete).
        self._describe = weakref.WeakMethod(hovered)
        self.setBackgroundBrush(QColor("#ffffff"))
        self.nodes: dict[str, NodeItem] = {}
        self.boxes: dict[str, BoxItem] = {}
        for node_id, (x0, y0, x1, y1) in layout.boxes.items():
            node = graph.node(node_id)
            box = BoxItem(node_id, QRectF(x0, y0, x1 - x0, y1 - y0), node.module)
            self.addItem(box)
            self.boxes[node_id] = box
        for node_id, (x, y) in layout.positions.items():
            w, h = layout.sizes[node_id]
            node = graph.node(node_id)
            label = f"{node.name} (+{node.hidden})" if node.hidden else node.name
            item = NodeItem(node_id, QRectF(x - w / 2, y - h / 2, w, h), label)
            self.addItem(item)
            self.nodes[node_id] = item
        links = graph.edges or self._tree_links()
        self.edges = QGraphicsPathItem(self._edge_path(links, arrows=bool(graph.edges)))
        # Without data flow (a graph from names) the lines are the module tree, dotted.
        style = Qt.PenStyle.SolidLine if graph.edges else Qt.PenStyle.DotLine
        self.edges.setPen(QPen(QColor(EDGE_COLOUR), 1.0, style))
        self.edges.setZValue(1)
        self.addItem(self.edges)
        self.spread_edges = QGraphicsPathItem()
        self.spread_edges.setPen(QPen(QColor(SPREAD_COLOUR), 2.5))
        self.spread_edges.setZValue(1.5)
        self.addItem(self.spread_edges)
        for item in (self.edges, self.spread_edges):
            item.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable, False)
        margin = 30.0
        self.setSceneRect(
            QRectF(-margin, -margin, layout.width + 2 * margin, layout.height + 2 * margin)
        )

    def describe(self, node_id: str) -> str:
        describe = self._describe()
        return describe(node_id) if describe is not None else ""

    def _tree_links(self) -> list[tuple[str, str]]:
        return [(n.parent, n.id) for n in self.graph.nodes if n.parent in self.layout.positions]

    def _edge_path(self, edges, arrows: bool = True) -> QPainterPath:
        """Each edge from the bottom of its source to the top of its target, with a small
        arrowhead (data flows downward)."""
        path = QPainterPath()
        pos, sizes = self.layout.positions, self.layout.sizes
        for a, b in edges:
            if a not in pos or b not in pos:
                continue
            (xa, ya), (xb, yb) = pos[a], pos[b]
            start = QPointF(xa, ya + sizes[a][1] / 2)
            end = QPointF(xb, yb - sizes[b][1] / 2)
            path.moveTo(start)
            middle = (start.y() + end.y()) / 2
            path.cubicTo(QPointF(start.x(), middle), QPointF(end.x(), middle), end)
            if not arrows:
                continue
            path.moveTo(end)
            path.lineTo(end + QPointF(-3.0, -5.0))
            path.moveTo(end)
            path.lineTo(end + QPointF(3.0, -5.0))
        return path

    def set_spread_edges(self, edges) -> None:
        self.spread_edges.setPath(self._edge_path(edges))
