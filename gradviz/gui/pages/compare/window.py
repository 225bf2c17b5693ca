"""Side by side: two distance-fit runs on the same data at once, each view paired.

The left run is the lab's setup as it stands; the right run is the same setup (same
target, initial coordinates, seed and steps) with the method, and optionally the learning
rate, the user picks here. Naive beside safe shows the NaN diagonal on one side and its
absence on the other. Zoom and pan are shared by all four matrices; both runs work off the
GUI thread, each with its own generation, and closing the window joins both threads.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.config import DISTANCE_METHODS, FitConfig
from gradviz.gui.pages.compare.side import CompareSide
from gradviz.gui.run.session import RunSession
from gradviz.gui.widgets.panel import RangeLink


class CompareWindow(QMainWindow):
    """Two runs side by side. ``base_config()`` gives the left run's settings (the lab's).

    ``failed(sentence, details)`` reports a run or settings failure for the app to show.
    """

    failed = Signal(str, str)

    def __init__(self, base_config: Callable[[], FitConfig], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("gradviz — side by side")
        self.setObjectName("gradviz-compare-window")
        self.resize(1280, 860)
        self.base_config = base_config
        self.left = CompareSide("A (lab setup)")
        self.right = CompareSide("B")

        self.method_box = QComboBox()
        for name, tip in DISTANCE_METHODS.items():
            self.method_box.addItem(name)
            self.method_box.setItemData(
                self.method_box.count() - 1, tip, Qt.ItemDataRole.ToolTipRole
            )
        self.method_box.setCurrentText("safe")
        self.method_box.setToolTip("Distance method of run B")
        self.lr_check = QCheckBox("own learning rate")
        self.lr_check.setToolTip("Give run B its own learning rate (else the lab's)")
        self.lr_box = QDoubleSpinBox()
        self.lr_box.setDecimals(6)
        self.lr_box.setRange(1e-6, 10.0)
        self.lr_box.setSingleStep(1e-3)
        self.lr_box.setValue(1e-2)
        self.lr_box.setEnabled(False)
        self.lr_check.toggled.connect(self.lr_box.setEnabled)
        self.start_button = QPushButton("Start both")
        self.start_button.setToolTip("Run A (the lab's setup) and B (the same data, B's method)")
        self.stop_button = QPushButton("Stop both")
        self.setup_label = QLabel("")
        self.setup_label.setStyleSheet("color: #444;")
        self.summary = QLabel("")
        self.summary.setObjectName("compare-summary")
        self.summary.setWordWrap(True)

        controls = QHBoxLayout()
        controls.addWidget(QLabel("B's method"))
        controls.addWidget(self.method_box)
        controls.addWidget(self.lr_check)
        controls.addWidget(self.lr_box)
        controls.addSpacing(16)
        controls.addWidget(self.start_button)
        controls.addWidget(self.stop_button)
        controls.addSpacing(16)
        controls.addWidget(self.setup_label, stretch=1)
        columns = QSplitter()
        columns.addWidget(self.left)
        columns.addWidget(self.right)
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(controls)
        layout.addWidget(self.summary)
        layout.addWidget(columns, stretch=1)
        self.setCentralWidget(central)

        panels = [
            self.left.mask_view,
            self.right.mask_view,
            self.left.distances_view,
            self.right.distances_view,
        ]
        self._range_link = RangeLink(panels, self)
        self._panels = panels
        self.selected_cell: tuple[int, int] | None = None
        for panel in panels:
            panel.cellClicked.connect(self.select_cell)
        self.start_button.clicked.connect(self.start)
        self.stop_button.clicked.connect(self.stop)
        for side in (self.left, self.right):
            side.failed.connect(self._on_side_failed)
            side.changed.connect(self._on_side_changed)
        self._update_buttons()

    @property
    def sides(self) -> tuple[CompareSide, CompareSide]:
        return self.left, self.right

    def configs(self) -> tuple[FitConfig, FitConfig]:
        """The two runs' settings: the lab's, and the same with B's method (and lr)."""
        base = self.base_config().validated()
        changes: dict[str, object] = {"method": self.method_box.currentText()}
        if self.lr_check.isChecked():
            changes["lr"] = float(self.lr_box.value())
        return base, base.with_changes(**changes).validated()

    @Slot()
    def start(self) -> None:
        """Start both runs from step 0, on the same data."""
        try:
            a, b = self.configs()
        except GradvizError as exc:
            self.failed.emit(str(exc), "")
            return
        self.setup_label.setText(
            f"same data: {a.target}, N = {a.n}, D = {a.dim}, init {a.init}, seed {a.seed}, "
            f"{a.steps:,} steps"
        )
        self.left.start(a)
        self.right.start(b)
        self._update_buttons()

    @Slot()
    def stop(self) -> None:
        for session in self.sessions:
            session.stop()
        self._update_buttons()

    @property
    def sessions(self) -> tuple[RunSession, RunSession]:
        """The two runs, A's and B's."""
        return self.left.session, self.right.session

    @property
    def going(self) -> bool:
        """Whether either run has been started and has not ended."""
        return any(session.state.going for session in self.sessions)

    def shutdown(self, timeout_s: float = 30.0) -> bool:
        """Stop both runs and join their threads; True when both have ended."""
        return all([session.shutdown(timeout_s) for session in self.sessions])

    @property
    def thread_count(self) -> int:
        return sum(len(session.workers()) for session in self.sessions)

    @Slot(int, int)
    def select_cell(self, i: int, j: int) -> None:
        """Outline entry (i, j) in all four matrices, so one pair is read on both sides."""
        self.selected_cell = (i, j)
        for panel in self._panels:
            panel.set_marker(i, j)

    @Slot(str, str)
    def _on_side_failed(self, sentence: str, details: str) -> None:
        self.failed.emit(sentence, details)

    @Slot()
    def _on_side_changed(self) -> None:
        self._update_buttons()
        latest = [session.latest for session in self.sessions]
        if latest[0] is None or latest[1] is None:
            return
        a, b = (session.first_nonfinite_grad_step for session in self.sessions)
        names = [s.method for s in latest]
        if (a is None) != (b is None):
            bad, good = (names[0], names[1]) if a is not None else (names[1], names[0])
            step = a if a is not None else b
            self.summary.setText(
                f"<b>{bad}</b> has a non-finite gradient from step {step}; <b>{good}</b> on the "
                "same data stays finite."
            )
        elif a is None:
            self.summary.setText("Both runs have finite gradients so far.")
        else:
            self.summary.setText(f"Both runs went non-finite (A at step {a}, B at step {b}).")

    def _update_buttons(self) -> None:
        self.stop_button.setEnabled(self.going)
        self.start_button.setEnabled(all(session.available for session in self.sessions))

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        for session in self.sessions:  # the runs end with the window; it can start again
            session.join()
        event.accept()
