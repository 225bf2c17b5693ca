"""Details of one clicked pair (i, j): distances, squared distance, gradient and its health."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFormLayout, QLabel, QWidget

from gradviz.core.common.health import HEALTH_LABELS, Health
from gradviz.core.lab.snapshot import Snapshot
from gradviz.gui.widgets import palette
from gradviz.gui.widgets.panel import format_value

# (field name, row label); the gradient row's label names what it is a derivative of.
FIELDS = (
    ("pair", "pair (i, j)"),
    ("d_pred", "d_pred"),
    ("d_target", "d_target"),
    ("error", "d_pred - d_target"),
    ("squared", "squared distance"),
    ("grad", "dLoss / d entry"),
    ("health", "gradient health"),
    ("coord_grad_i", "|dLoss / d x_i|"),
    ("coord_grad_j", "|dLoss / d x_j|"),
)


class PairView(QWidget):
    """A form with the numbers behind one matrix cell, refreshed with every snapshot."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        form = QFormLayout(self)
        form.setContentsMargins(6, 6, 6, 6)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
        self._values: dict[str, QLabel] = {}
        self._names: dict[str, QLabel] = {}
        for key, title in FIELDS:
            name = QLabel(title)
            value = QLabel("-")
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            value.setTextFormat(Qt.TextFormat.PlainText)
            form.addRow(name, value)
            self._names[key], self._values[key] = name, value
        self.pair: tuple[int, int] | None = None
        self.clear()

    def field_text(self, key: str) -> str:
        """The text shown for a field (keys as in FIELDS), e.g. ``field_text("d_pred")``."""
        return self._values[key].text()

    def clear(self) -> None:
        self.pair = None
        for key, label in self._values.items():
            label.setText("click a matrix cell" if key == "pair" else "-")
        self._values["health"].setStyleSheet("")

    def show_pair(self, snapshot: Snapshot, i: int, j: int) -> None:
        """Fill the form with entry (i, j) of ``snapshot``."""
        self.pair = (i, j)
        n = snapshot.n_points
        if not (0 <= i < n and 0 <= j < n):
            self.clear()
            return
        has_squared = snapshot.squared is not None
        self._names["grad"].setText("dLoss / d squared" if has_squared else "dLoss / d distance")
        # A display-sized snapshot holds block values: shown as approximate ("≈") until the
        # run sends the entry's exact values (show_exact).
        block = snapshot.display_block
        cell = (i // block, j // block)
        mark = "" if block == 1 else "≈ "
        code = Health(int(snapshot.entry_health[cell]))

        def value(matrix: np.ndarray) -> str:
            return mark + format_value(float(matrix[cell]))

        no_squared = "n/a (no squared distances)"
        text = {
            "pair": f"({i}, {j})",
            "d_pred": value(snapshot.distances),
            "d_target": value(snapshot.target_distances),
            "error": value(snapshot.error),
            "squared": value(snapshot.squared) if has_squared else no_squared,
            "grad": value(snapshot.entry_grads),
            "health": HEALTH_LABELS[code] + ("" if block == 1 else f" (its {block}x{block} block)"),
            "coord_grad_i": _point_grad_text(snapshot.coord_grads, i),
            "coord_grad_j": _point_grad_text(snapshot.coord_grads, j),
        }
        for key, value in text.items():
            self._values[key].setText(value)
        colour = palette.OKABE_ITO[code]
        self._values["health"].setStyleSheet(f"color: {colour}; font-weight: bold;")

    def show_exact(self, i: int, j: int, values: dict[str, float]) -> None:
        """Replace the block values of the pair by the run's exact ones (``cell_values``)."""
        if self.pair != (i, j):
            return
        for key, text in exact_texts(values).items():
            self._values[key].setText(text)
        if "entry_health" in values:
            colour = palette.OKABE_ITO[Health(int(values["entry_health"]))]
            self._values["health"].setStyleSheet(f"color: {colour}; font-weight: bold;")


def exact_texts(values: dict[str, float]) -> dict[str, str]:
    """PairView field texts from a run's exact ``cell_values`` (by Snapshot field name)."""
    names = {
        "distances": "d_pred",
        "target_distances": "d_target",
        "error": "error",
        "squared": "squared",
        "entry_grads": "grad",
    }
    texts = {k: format_value(float(values[name])) for name, k in names.items() if name in values}
    if "entry_health" in values:
        texts["health"] = HEALTH_LABELS[Health(int(values["entry_health"]))]
    return texts


def _point_grad_text(grads: np.ndarray, i: int) -> str:
    """Point i's gradient norm; "not recorded" where the snapshot has none ((0, D))."""
    return _norm_text(grads[i]) if i < len(grads) else "not recorded"


def _norm_text(grad: np.ndarray) -> str:
    """Euclidean norm of one point's ``(D,)`` gradient; NaN/Inf shown as such."""
    g = np.asarray(grad, dtype=np.float64)
    if not np.isfinite(g).all():
        bad = "NaN" if np.isnan(g).any() else "Inf"
        return f"{bad} (components: {', '.join(format_value(float(v)) for v in g)})"
    return format_value(float(np.linalg.norm(g)))
