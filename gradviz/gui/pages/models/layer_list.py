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


#: Columns sized to their whole text; Weights, Layer and Shapes share what is left (elided,
#: whole in their tooltips).
FITTED = ("Type", "Parameters")
GIVING_WAY = ("Layer", "Shapes", "Weights")
#: The least width each giving-way column keeps, in pixels (a few characters and "…").
GIVING_WAY_MIN = 40


class LayerTable(QTableWidget):
    """Read-only layer list; ``show_info(info)`` fills it, ``clear_rows()`` empties it.

    Type and Parameters always show their whole text; the flags, the layer names and the
    shapes give way (elided) in a narrow panel: the flags take up to a third of the room,
    the names up to half of the rest while the shapes want it. ``fitting_width()`` is the
    width at which that holds (the panel never gets narrower)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(COLUMNS), parent)
        self.setObjectName("model-layers")
        self.setHorizontalHeaderLabels(COLUMNS)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.verticalHeader().setVisible(False)
        header = self.horizontalHeader()
        header.setStretchLastSection(False)
        header.setMinimumSectionSize(GIVING_WAY_MIN // 2)
        for column, name in enumerate(COLUMNS):
            mode = (
                QHeaderView.ResizeMode.Fixed
                if name in FITTED
                else QHeaderView.ResizeMode.Interactive
            )
            header.setSectionResizeMode(column, mode)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)
        # Columns are laid out to the viewport: a horizontal scroll bar would hide the
        # counts behind it (at 1920 x 1080 the panel is ~240 px wide).
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._fit_columns()

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
        self._fit_columns()

    def clear_rows(self) -> None:
        self.setRowCount(0)
        self._fit_columns()

    def row_texts(self) -> list[list[str]]:
        """The table's text, row by row (what the user reads)."""
        return [
            [self.item(r, c).text() for c in range(self.columnCount())]
            for r in range(self.rowCount())
        ]

    def fitting_width(self) -> int:
        """The least width at which the fitted columns show their whole text beside the
        least room for the layer names and shapes."""
        bar = self.verticalScrollBar().sizeHint().width()
        giving_way = 2 * GIVING_WAY_MIN + self._flags_min()
        return self._fitted_width() + giving_way + 2 * self.frameWidth() + bar

    def resizeEvent(self, event) -> None:  # Qt override
        super().resizeEvent(event)
        self._fit_columns()

    def _needed(self, column: int) -> int:
        header = self.horizontalHeader()
        return max(self.sizeHintForColumn(column), header.sectionSizeHint(column))

    def _flags_min(self) -> int:
        """The Weights column is never narrower than its header (nor GIVING_WAY_MIN)."""
        column = COLUMNS.index("Weights")
        return max(GIVING_WAY_MIN, self.horizontalHeader().sectionSizeHint(column))

    def _fitted_width(self) -> int:
        return sum(self._needed(COLUMNS.index(name)) for name in FITTED)

    def _fit_columns(self) -> None:
        header = self.horizontalHeader()
        for name in FITTED:
            column = COLUMNS.index(name)
            header.resizeSection(column, self._needed(column))
        least = 2 * GIVING_WAY_MIN + self._flags_min()
        room = max(least, self.viewport().width() - self._fitted_width())
        layer, shapes, flags = (COLUMNS.index(name) for name in GIVING_WAY)
        flags_width = max(self._flags_min(), min(self._needed(flags), room // 3))
        header.resizeSection(flags, flags_width)
        room -= flags_width
        width = min(self._needed(layer), max(room // 2, room - self._needed(shapes)))
        width = max(GIVING_WAY_MIN, min(width, room - GIVING_WAY_MIN))
        header.resizeSection(layer, width)
        header.resizeSection(shapes, room - width)
