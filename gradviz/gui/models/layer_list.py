"""A table of a model's layers: name, type, tensor shapes, parameter count, NaN/Inf flags."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

from gradviz.core.modelio import ModelInfo

COLUMNS = ("Layer", "Type", "Shapes", "Parameters", "Weights")
NONFINITE_COLOUR = QColor("#c0392b")


def layer_rows(info: ModelInfo) -> list[tuple[str, str, str, str, str]]:
    """One row of text per layer; the last column flags layers holding NaN or Inf."""
    bad = set(info.nonfinite_weights)
    rows = []
    for layer in info.layers:
        shapes = ", ".join(
            f"{name} {'×'.join(str(s) for s in shape) or 'scalar'}"
            for name, shape in layer.shapes.items()
        )
        flagged = [n for n in bad if n == layer.name or n.startswith(f"{layer.name}.")]
        flag = (
            "NaN/Inf in " + ", ".join(sorted(n.rsplit(".", 1)[-1] for n in flagged))
            if flagged
            else "finite"
        )
        rows.append((layer.name, layer.kind, shapes, f"{layer.parameters:,}", flag))
    return rows


class LayerTable(QTableWidget):
    """Read-only layer list; ``show_info(info)`` fills it, ``clear_rows()`` empties it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(COLUMNS), parent)
        self.setObjectName("model-layers")
        self.setHorizontalHeaderLabels(COLUMNS)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.verticalHeader().setVisible(False)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        # The shapes give way (elided, in full in the tooltip) so that the Parameters and
        # Weights columns are never cut in a narrow panel.
        header.setSectionResizeMode(COLUMNS.index("Shapes"), QHeaderView.ResizeMode.Stretch)
        header.setStretchLastSection(False)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)

    def show_info(self, info: ModelInfo) -> None:
        rows = layer_rows(info)
        self.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                if c == len(row) - 1 and text != "finite":
                    item.setForeground(NONFINITE_COLOUR)
                self.setItem(r, c, item)

    def clear_rows(self) -> None:
        self.setRowCount(0)

    def row_texts(self) -> list[list[str]]:
        """The table's text, row by row (what the user reads)."""
        return [
            [self.item(r, c).text() for c in range(self.columnCount())]
            for r in range(self.rowCount())
        ]
