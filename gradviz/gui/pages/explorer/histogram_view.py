"""Parameter-gradient histograms, one row per parameter tensor, with NaN, +Inf, -Inf and
exact zeros drawn as their own labelled bars beside the histogram of the finite values."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QScrollArea, QSizePolicy, QVBoxLayout, QWidget

from gradviz.core.common.health import Health
from gradviz.gui.widgets import axes
from gradviz.gui.widgets.palette import ALARM_TEXT, OKABE_ITO

#: The special bins, in the order drawn, with their colours (the gradient-health palette).
SPECIAL_BINS: tuple[tuple[str, str, str], ...] = (
    ("zero", "0", OKABE_ITO[Health.ZERO]),
    ("nan", "NaN", OKABE_ITO[Health.NAN]),
    ("pos_inf", "+Inf", OKABE_ITO[Health.POS_INF]),
    ("neg_inf", "-Inf", OKABE_ITO[Health.NEG_INF]),
)
ROW_HEIGHT = 150
FINITE_COLOUR = OKABE_ITO[Health.FINITE]


def special_counts(hist) -> dict[str, int]:
    """The counts of the special bins of a LayerHistogram, by label (0, NaN, +Inf, -Inf)."""
    return {label: int(getattr(hist, attr)) for attr, label, _ in SPECIAL_BINS}


def describe(hist) -> str:
    """One line about a parameter's gradient: shape, counts and what is alarming."""
    shape = " x ".join(str(s) for s in hist.shape) or "scalar"
    if not hist.has_gradient:
        return f"<b>{hist.name}</b> ({shape}): the loss does not depend on it (no gradient)"
    names = {"0": "zeros"}
    parts = [f"{names.get(k, k)}: {n}" for k, n in special_counts(hist).items()]
    alarm = ""
    if hist.nonfinite:
        alarm = f' <span style="color:{ALARM_TEXT}">&#9888; non-finite gradient</span>'
    return f"<b>{hist.name}</b> ({shape}, {hist.size} values) · " + " · ".join(parts) + alarm


class HistogramRow(QWidget):
    """One parameter: a title line, the finite-value histogram and the four special bars."""

    def __init__(self, hist, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.hist = hist
        self.title = QLabel(describe(hist))
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setFixedHeight(ROW_HEIGHT)
        self.graphics.ci.setContentsMargins(2, 2, 2, 2)
        # Our axes: pyqtgraph's stock axis leaks a reference to None per redraw here.
        self.finite_plot = axes.PlotItem(enableMenu=False)
        self.graphics.addItem(self.finite_plot)
        self.finite_plot.setLabel("bottom", "finite, non-zero gradient values")
        self.finite_plot.setLabel("left", "count")
        self.special_plot = axes.PlotItem(enableMenu=False)
        self.graphics.addItem(self.special_plot)
        self.special_plot.setMouseEnabled(False, False)
        self.special_plot.setLabel("bottom", "own bins")
        self.special_plot.hideAxis("left")  # each bar carries its count
        self.graphics.ci.layout.setColumnStretchFactor(0, 3)
        self.graphics.ci.layout.setColumnStretchFactor(1, 1)
        self.special_labels: list[pg.TextItem] = []
        self._draw_finite()
        self._draw_special()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 4)
        layout.setSpacing(1)
        layout.addWidget(self.title)
        layout.addWidget(self.graphics)

    def _draw_finite(self) -> None:
        hist = self.hist
        counts = np.asarray(hist.counts, dtype=float)
        edges = np.asarray(hist.edges, dtype=float)
        if counts.sum() == 0:
            text = pg.TextItem("no finite non-zero values", color="#aaaaaa", anchor=(0.5, 0.5))
            self.finite_plot.addItem(text)
            text.setPos(0.5, 0.5)
            self.finite_plot.setRange(xRange=(0, 1), yRange=(0, 1))
            return
        centres = (edges[:-1] + edges[1:]) / 2
        widths = np.diff(edges)
        bars = pg.BarGraphItem(
            x=centres, height=counts, width=widths * 0.95, brush=FINITE_COLOUR, pen=None
        )
        self.finite_plot.addItem(bars)
        self.finite_plot.setYRange(0, counts.max() * 1.1)

    def _draw_special(self) -> None:
        counts = special_counts(self.hist)
        heights = np.array(list(counts.values()), dtype=float)
        brushes = [pg.mkBrush(colour) for _, _, colour in SPECIAL_BINS]
        bars = pg.BarGraphItem(
            x=np.arange(4), height=heights, width=0.7, brushes=brushes, pen=pg.mkPen("#888")
        )
        self.special_plot.addItem(bars)
        axis = self.special_plot.getAxis("bottom")
        axis.setTicks([[(k, label) for k, (_, label, _) in enumerate(SPECIAL_BINS)]])
        top = max(heights.max(), 1.0)
        for k, count in enumerate(heights):
            text = pg.TextItem(str(int(count)), color="#dddddd", anchor=(0.5, 1.0))
            text.setPos(k, count)
            self.special_plot.addItem(text)
            self.special_labels.append(text)
        self.special_plot.setRange(xRange=(-0.6, 3.6), yRange=(0, top * 1.3), padding=0)


class HistogramView(QWidget):
    """All parameters of the network, scrolled; a note says which loss they are for."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.rows: list[HistogramRow] = []
        self._inner = QWidget()
        self._rows_layout = QVBoxLayout(self._inner)
        self._rows_layout.setContentsMargins(4, 4, 4, 4)
        self._rows_layout.addStretch(1)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setWidget(self._inner)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.note)
        layout.addWidget(self.scroll, stretch=1)

    def show_histograms(self, histograms: list | None, note: str, loss_name: str) -> None:
        """Show a list of core LayerHistogram (or none, with ``note`` saying why)."""
        for row in self.rows:
            self._rows_layout.removeWidget(row)
            row.deleteLater()
        self.rows = []
        if histograms is None:
            self.note.setText(note)
            return
        for hist in histograms:
            row = HistogramRow(hist)
            self._rows_layout.insertWidget(self._rows_layout.count() - 1, row)
            self.rows.append(row)
        bad = sum(h.nonfinite for h in histograms)
        alarm = f" {bad} non-finite gradient entries." if bad else " All gradients are finite."
        self.note.setText(
            f"Gradient of the loss ({loss_name}) with respect to each parameter tensor. "
            f"Zeros, NaN, +Inf and -Inf are counted in their own bars, never binned.{alarm}"
            + (f" {note}" if note else "")
        )

    def counts(self) -> dict[str, dict[str, int]]:
        """Parameter name -> special-bin counts shown (for checks and tests)."""
        return {row.hist.name: special_counts(row.hist) for row in self.rows}
