"""How the Graph page colours a drawn graph at one step: each node filled with its worst
gradient category (the Model health page's palette), darker for a smaller gradient norm,
outlined where the first non-finite value began or spread; the selection drawn over it."""

from __future__ import annotations

import math

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QPen

from gradviz.core.common.health import Health
from gradviz.core.graph.model import ModelGraph
from gradviz.gui.pages.graph.health import GroupHealth
from gradviz.gui.pages.graph.scene import (
    NO_HEALTH,
    ORIGIN_COLOUR,
    SELECTED_COLOUR,
    SPREAD_COLOUR,
    GraphScene,
)
from gradviz.gui.widgets.palette import OKABE_ITO


def paint(
    scene: GraphScene,
    shown: ModelGraph,
    now: dict[str, GroupHealth],
    marks: dict[str, frozenset],
    selected: str | None,
) -> None:
    """Colour ``scene`` (drawn from ``shown``) with the health ``now`` of each node id and
    the ``marks`` (``origin``, ``after``) of the first non-finite value."""
    norms = [h.norm for h in now.values() if h.norm > 0 and math.isfinite(h.norm)]
    low, high = (math.log10(min(norms)), math.log10(max(norms))) if norms else (0.0, 0.0)
    for node_id, item in scene.nodes.items():
        fill = _fill(now.get(node_id), low, high)
        item.setBrush(QBrush(fill))
        item.text.setBrush(QColor("#000000" if fill.lightnessF() > 0.5 else "#ffffff"))
        item.setPen(_pen(node_id, marks, selected))
    for node_id, box in scene.boxes.items():
        colour = ORIGIN_COLOUR if node_id in marks["origin"] else "#8c8c8c"
        width = 2.5 if node_id in marks["origin"] else 1.0
        pen = QPen(QColor(colour), width, Qt.PenStyle.DashLine)
        if node_id == selected:
            pen = QPen(QColor(SELECTED_COLOUR), 2.0, Qt.PenStyle.DashLine)
        box.setPen(pen)
    reached = marks["origin"] | marks["after"]
    scene.set_spread_edges([(a, b) for a, b in shown.edges if a in reached and b in marks["after"]])


def _pen(node_id: str, marks: dict[str, frozenset], selected: str | None) -> QPen:
    if node_id == selected:
        return QPen(QColor(SELECTED_COLOUR), 3.0, Qt.PenStyle.DashLine)
    if node_id in marks["origin"]:
        return QPen(QColor(ORIGIN_COLOUR), 4.0)
    if node_id in marks["after"]:
        return QPen(QColor(SPREAD_COLOUR), 2.5)
    return QPen(QColor("#505050"), 0.8)


def _fill(health: GroupHealth | None, low: float, high: float) -> QColor:
    """The palette colour of the worst category, darker for a smaller norm (log scale over
    the graph at this step); grey without gradients."""
    if health is None or health.worst is None:
        return QColor(NO_HEALTH)
    colour = QColor(OKABE_ITO[Health(health.worst)])
    finite = math.isfinite(health.norm)
    if health.worst in (Health.FINITE, Health.ZERO) and high > low and finite and health.norm > 0:
        t = (math.log10(health.norm) - low) / (high - low)
        colour = colour.darker(int(100 + 80 * (1.0 - min(max(t, 0.0), 1.0))))
    return colour
