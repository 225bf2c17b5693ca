"""Several runs on one plot: the loss (or total gradient norm) of recordings and of the lab's
live run overlaid, with a legend, a toggle per run and a log axis.

``RunsOverlay.add_run(label, steps, losses, grad_norm)`` adds (or replaces) one run's curves;
the page never reads files itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from gradviz.gui.recordings.data import RecordingData
from gradviz.gui.widgets.axes import PlotItem

PAGE_TITLE = "Runs"
#: Okabe-Ito colours, one per run in turn (colour-blind safe; yellow, hard to read in the
#: list, last).
RUN_COLOURS = ("#E69F00", "#56B4E9", "#009E73", "#CC79A7", "#0072B2", "#D55E00", "#F0E442")
QUANTITIES = {"loss": "loss", "grad_norm": "gradient norm (all tensors)"}


@dataclass
class OverlaidRun:
    label: str
    steps: np.ndarray  # (S,) step numbers
    values: dict[str, np.ndarray]  # quantity -> (S,) float64
    curve: pg.PlotDataItem


def total_grad_norm(data: RecordingData) -> np.ndarray:
    """(S,) L2 norm over all watched tensors' finite gradient entries at each step."""
    if not len(data.tensors):
        return np.full(data.n_steps, np.nan)
    return np.sqrt(np.nansum(data.grad_norm**2, axis=0))


class RunsOverlay(QWidget):
    """``addRecordingRequested`` (the "Add recording…" button), ``addLiveRequested``."""

    addRecordingRequested = Signal()
    addLiveRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("runs-page")
        self.runs: dict[str, OverlaidRun] = {}
        self.plot = pg.PlotWidget(plotItem=PlotItem())
        self.plot.setObjectName("runs-plot")
        self.plot.setLabel("bottom", "step")
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        self.legend = self.plot.addLegend(offset=(-10, 10))
        self.list = QListWidget()
        self.list.setToolTip("Tick a run to show its curve")
        self.list.itemChanged.connect(self._on_item_changed)
        self.quantity = QComboBox()
        for key, text in QUANTITIES.items():
            self.quantity.addItem(text, key)
        self.quantity.currentIndexChanged.connect(self._redraw)
        self.log_y = QCheckBox("log axis")
        self.log_y.setChecked(True)
        self.log_y.toggled.connect(self._redraw)
        add = QPushButton("Add recording…")
        add.clicked.connect(self.addRecordingRequested)
        live = QPushButton("Add the live run")
        live.setToolTip("Add the lab's current run (its loss so far)")
        live.clicked.connect(self.addLiveRequested)
        side = QWidget()
        box = QVBoxLayout(side)
        box.addWidget(self.list, 1)
        for w in (self.quantity, self.log_y, add, live):
            box.addWidget(w)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.plot)
        split.addWidget(side)
        split.setStretchFactor(0, 4)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(split)
        self._redraw()

    def add_recording(self, data: RecordingData) -> None:
        label = f"{data.path} (rank {data.rank})" if len(data.ranks) > 1 else data.path
        self.add_run(label, data.steps, data.losses, total_grad_norm(data))

    def add_run(
        self, label: str, steps: np.ndarray, losses: np.ndarray, grad_norm: np.ndarray | None
    ) -> None:
        """Overlay one run (replacing an earlier one of the same label)."""
        values = {"loss": np.asarray(losses, np.float64)}
        if grad_norm is not None:
            values["grad_norm"] = np.asarray(grad_norm, np.float64)
        if label in self.runs:
            self.runs[label].steps, self.runs[label].values = np.asarray(steps), values
        else:
            colour = RUN_COLOURS[len(self.runs) % len(RUN_COLOURS)]
            curve = self.plot.plot([], [], pen=pg.mkPen(colour, width=2), name=label)
            self.runs[label] = OverlaidRun(label, np.asarray(steps), values, curve)
            item = QListWidgetItem(label)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked)
            item.setForeground(pg.mkColor(colour))
            self.list.addItem(item)
        self._redraw()

    def visible_runs(self) -> list[str]:
        return [r.label for r in self.runs.values() if r.curve.isVisible()]

    @Slot(QListWidgetItem)
    def _on_item_changed(self, item: QListWidgetItem) -> None:
        run = self.runs.get(item.text())
        if run is not None:
            run.curve.setVisible(item.checkState() == Qt.CheckState.Checked)

    @Slot()
    def _redraw(self) -> None:
        key = self.quantity.currentData()
        log = self.log_y.isChecked()
        self.plot.setLogMode(y=log)
        self.plot.setLabel("left", QUANTITIES[key])
        for run in self.runs.values():
            y = run.values.get(key, np.full(len(run.steps), np.nan))
            ok = np.isfinite(y) & ((y > 0) if log else True)  # log axis: positive only
            run.curve.setData(run.steps[ok], y[ok])
