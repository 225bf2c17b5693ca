"""One column of the side-by-side comparison: one run session and its views.

A ``CompareSide`` owns a ``RunSession`` (the same model of a run as the lab's) and draws
that run's predicted distances, gradient health and loss with the lab's own views. All it
adds is the header that names the run's verdict.
"""

from __future__ import annotations

from functools import partial

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import QFrame, QLabel, QSplitter, QVBoxLayout, QWidget

from gradviz.core.common.run_threads import available_cores
from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.settings.config import FitConfig
from gradviz.gui.run.session import RunSession, RunState
from gradviz.gui.run.status import (
    FINITE_STYLE,
    NAN_STYLE,
    failure_text,
    first_nonfinite_text,
    loss_text,
    set_style,
    threads_tooltip,
)
from gradviz.gui.run.views import HealthView, LossCurveView, MatrixView
from gradviz.gui.run.worker import default_run_factory


class CompareSide(QWidget):
    """A run and its paired views: predicted distances, gradient health and loss.

    ``failed(sentence, details)`` is re-emitted, named, for the window to show; ``changed``
    follows every new snapshot and state of the run.
    """

    failed = Signal(str, str)
    changed = Signal()

    def __init__(self, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        # Two runs share the cores: each one's automatic thread choice may use half.
        factory = partial(default_run_factory, cores=max(1, available_cores() // 2))
        self.session = RunSession(run_factory=factory, frame_rate=20.0, parent=self)
        self.views = (MatrixView("distances", "d_pred"), HealthView(), LossCurveView())
        self.distances_view, self.mask_view, self.loss_view = (v.widget for v in self.views)

        self.title = QLabel(name)
        self.title.setObjectName(f"compare-title-{name}")
        self.title.setStyleSheet("font-size: 14px; font-weight: bold;")
        self.verdict = QLabel("")
        self.verdict.setObjectName(f"compare-verdict-{name}")
        self.numbers = QLabel("")
        header = QFrame()
        header.setFrameShape(QFrame.Shape.StyledPanel)
        header_layout = QVBoxLayout(header)
        header_layout.setContentsMargins(8, 4, 8, 4)
        header_layout.setSpacing(1)
        for label in (self.title, self.verdict, self.numbers):
            header_layout.addWidget(label)
        splitter = QSplitter(Qt.Orientation.Vertical)
        for widget in (self.mask_view, self.distances_view, self.loss_view):
            splitter.addWidget(widget)
        splitter.setSizes([400, 400, 220])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(header)
        layout.addWidget(splitter, stretch=1)
        self.session.snapshotShown.connect(self._on_snapshot_shown)
        self.session.cleared.connect(self._on_cleared)
        self.session.stateChanged.connect(self._on_state_changed)
        self.session.failed.connect(self._on_failed)
        self._show_verdict()

    def start(self, config: FitConfig) -> None:
        """Start a fresh run of ``config`` (a new generation; a running one is stopped)."""
        self.session.reset()
        self.session.start(config)
        self.title.setText(f"{self.name}: {config.method} · lr {config.lr:g}")

    @Slot(object)
    def _on_snapshot_shown(self, snapshot: Snapshot) -> None:
        for view in self.views:
            view.show(snapshot)
        self._show_verdict()
        self.changed.emit()

    @Slot()
    def _on_cleared(self) -> None:
        for view in self.views:
            view.clear()

    @Slot(object)
    def _on_state_changed(self, _state: RunState) -> None:
        self._show_verdict()
        self.changed.emit()

    @Slot(str, str)
    def _on_failed(self, sentence: str, details: str) -> None:
        self.failed.emit(f"{self.name}: {sentence}", details)

    def _show_verdict(self) -> None:
        s, state = self.session.latest, self.session.state
        if s is None:
            self.verdict.setText("waiting for the first step…" if state.going else "")
            set_style(self.verdict, "")
            self.numbers.setText("")
            return
        nonfinite = failure_text(self.session) or first_nonfinite_text(self.session)
        self.verdict.setText(f"✖ {nonfinite}" if nonfinite else "✔ gradients finite")
        set_style(self.verdict, NAN_STYLE if nonfinite else FINITE_STYLE)
        self.numbers.setText(f"step {s.step:,} · loss {loss_text(s.loss)} · {state.label}")
        tooltip = threads_tooltip(s)
        if self.numbers.toolTip() != tooltip:
            self.numbers.setToolTip(tooltip)
