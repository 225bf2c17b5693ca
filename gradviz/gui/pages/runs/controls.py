"""The Runs page's side panel: the runs (tick one to show it), the quantity drawn, the x
axis, the smoothing, the log axis, and the buttons that add runs."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QLabel,
    QListWidget,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from gradviz.core.record.run_series import X_AXES, quantity_text, scalar_key

#: The smoothing slider's default weight (TensorBoard's).
DEFAULT_SMOOTHING = 0.6


class RunsControls(QWidget):
    """``changed`` when the quantity, the x axis, the smoothing or the log axis changes;
    ``addRecordingRequested`` and ``addLiveRequested`` from the two buttons. ``list`` holds
    one checkable item per run."""

    changed = Signal()
    addRecordingRequested = Signal()
    addLiveRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.list = QListWidget()
        self.list.setToolTip("Tick a run to show its curve")
        self.quantity = QComboBox()
        self.quantity.setToolTip("The logged scalar or gradient norm drawn for every run")
        self.quantity.addItem(quantity_text(scalar_key("loss")), scalar_key("loss"))
        self.x_axis = QComboBox()
        for key, text in X_AXES.items():
            self.x_axis.addItem(f"x: {text}", key)
        self.x_axis.setToolTip("Step, wall time, or time since each run's first step")
        self.smoothing = QSlider(Qt.Orientation.Horizontal)
        self.smoothing.setRange(0, 99)
        self.smoothing.setValue(round(DEFAULT_SMOOTHING * 100))
        self.smoothing.setToolTip(
            "TensorBoard's smoothing: a debiased exponential moving average; the raw curve "
            "stays faint behind it"
        )
        self.smoothing_label = QLabel()
        self.log_y = QCheckBox("log axis")
        self.log_y.setChecked(True)
        for signal in (
            self.quantity.currentIndexChanged,
            self.x_axis.currentIndexChanged,
            self.smoothing.valueChanged,
            self.log_y.toggled,
        ):
            signal.connect(self.changed)
        add = QPushButton("Add recording…")
        add.clicked.connect(self.addRecordingRequested)
        live = QPushButton("Add the live run")
        live.setToolTip("Add the lab's current run; it grows as the run goes")
        live.clicked.connect(self.addLiveRequested)
        box = QVBoxLayout(self)
        box.addWidget(self.list, 1)
        for w in (self.quantity, self.x_axis, self.smoothing_label, self.smoothing):
            box.addWidget(w)
        for w in (self.log_y, add, live):
            box.addWidget(w)

    def quantity_key(self) -> str:
        return self.quantity.currentData()

    def x_kind(self) -> str:
        return self.x_axis.currentData()

    def weight(self) -> float:
        return self.smoothing.value() / 100

    def offer(self, keys) -> None:
        """List every quantity of ``keys`` not listed yet (the chosen one stays)."""
        offered = [self.quantity.itemData(i) for i in range(self.quantity.count())]
        for key in keys:
            if key not in offered:
                blocked = self.quantity.blockSignals(True)
                self.quantity.addItem(quantity_text(key), key)
                self.quantity.blockSignals(blocked)
                offered.append(key)
