"""One column of the side-by-side comparison: one run, its worker, and its views.

A ``CompareSide`` owns the workers of its runs (one generation at a time; an older one is
asked to stop and joined when it reports finished) and draws that run's predicted
distances, gradient health and loss. Worker signals arrive in the slots here, on the GUI
thread; the worker is told things only through its thread-safe flags.
"""

from __future__ import annotations

import logging
import math

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import QFrame, QLabel, QSplitter, QVBoxLayout, QWidget

from gradviz.core.config import FitConfig
from gradviz.core.snapshot import Snapshot
from gradviz.gui.widgets.healthmap import HealthMapView
from gradviz.gui.widgets.heatmap import HeatmapView
from gradviz.gui.widgets.loss import LossView
from gradviz.gui.lab.worker import FitWorker, WorkerHandle, WorkerPool

log = logging.getLogger(__name__)

_FINITE_STYLE = "color: #1e7b34; font-weight: bold;"
_NAN_STYLE = "color: #c0392b; font-weight: bold;"


class CompareSide(QWidget):
    """A run and its paired views: predicted distances, gradient health and loss.

    ``generation`` counts this side's runs; snapshots of an older one are dropped.
    ``failed(sentence, details)`` is re-emitted for the window to show.
    """

    failed = Signal(str, str)
    changed = Signal()  # a new snapshot was drawn, or the run ended

    def __init__(self, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.generation = 0
        self.config: FitConfig | None = None
        self.handle: WorkerHandle | None = None
        self.pool = WorkerPool()
        self.last_snapshot: Snapshot | None = None
        self.state = "idle"
        self._unacknowledged = False

        self.title = QLabel(name)
        self.title.setObjectName(f"compare-title-{name}")
        self.title.setStyleSheet("font-size: 14px; font-weight: bold;")
        self.verdict = QLabel("")
        self.verdict.setObjectName(f"compare-verdict-{name}")
        self.numbers = QLabel("")
        self.numbers.setStyleSheet("color: #444;")
        self.distances_view = HeatmapView("d_pred")
        self.mask_view = HealthMapView("dLoss/d entry", legend_columns=3)
        self.loss_view = LossView()

        header = QFrame()
        header.setFrameShape(QFrame.Shape.StyledPanel)
        header_layout = QVBoxLayout(header)
        header_layout.setContentsMargins(8, 4, 8, 4)
        header_layout.setSpacing(1)
        header_layout.addWidget(self.title)
        header_layout.addWidget(self.verdict)
        header_layout.addWidget(self.numbers)
        splitter = QSplitter(Qt.Orientation.Vertical)
        for widget in (self.mask_view, self.distances_view, self.loss_view):
            splitter.addWidget(widget)
        splitter.setSizes([400, 400, 220])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(header)
        layout.addWidget(splitter, stretch=1)
        self._show_verdict()

    # ---- runs ------------------------------------------------------------------------------
    def start(self, config: FitConfig, frame_rate: float = 20.0) -> None:
        """Start a fresh run of ``config`` (a new generation; a running one is stopped)."""
        self.stop()
        self.generation += 1
        self.config = config
        self.last_snapshot = None
        for view in (self.distances_view, self.mask_view, self.loss_view):
            view.clear()
        worker = FitWorker(config, self.generation, frame_rate=frame_rate)
        worker.snapshotReady.connect(self._on_snapshot)
        worker.failed.connect(self._on_failed)
        worker.finished.connect(self._on_finished)
        self.title.setText(f"{self.name}: {config.method} · lr {config.lr:g}")
        self.handle = self.pool.start(worker)
        self.state = "running"
        self._show_verdict()

    def stop(self) -> None:
        """Ask the current run to stop; its thread is joined when it reports finished."""
        if self.handle is not None:
            self.handle.worker.request_stop()
            self.handle = None
            if self.state in ("running", "paused"):
                self.state = "stopped"
            self._show_verdict()

    def pause(self) -> bool:
        """Pause the current run; True when it was running."""
        if self.handle is not None and self.state == "running":
            self.handle.worker.pause()
            self.state = "paused"
            return True
        return False

    def resume(self) -> None:
        if self.handle is not None and self.state == "paused":
            self.handle.worker.resume()
            self.state = "running"

    def workers(self) -> list[FitWorker]:
        """Every worker whose thread is still held."""
        return self.pool.workers()

    def shutdown(self, timeout_s: float = 30.0) -> bool:
        """Stop every run and join its thread; True when all have ended."""
        self.handle = None
        return self.pool.shutdown(timeout_s)

    @property
    def thread_count(self) -> int:
        return len(self.pool)

    @property
    def first_nan_step(self) -> int | None:
        s = self.last_snapshot
        return None if s is None else s.first_nonfinite_grad_step

    # ---- worker signals (GUI thread) -------------------------------------------------------
    @Slot(object, float)
    def _on_snapshot(self, snapshot: Snapshot, _steps_per_second: float) -> None:
        if snapshot.generation == self.generation:
            self.last_snapshot = snapshot
            self.distances_view.set_matrix(snapshot.distances)
            self.mask_view.set_codes(snapshot.entry_health, snapshot.entry_grads)
            self.loss_view.set_history(snapshot.loss_history, snapshot.reference_loss)
            self._show_verdict()
            self.changed.emit()
        if not self._unacknowledged:
            self._unacknowledged = True
            QTimer.singleShot(0, self._acknowledge)  # after the queued paint

    @Slot()
    def _acknowledge(self) -> None:
        self._unacknowledged = False
        for worker in self.pool.workers():
            worker.frame_drawn()

    @Slot(str, str)
    def _on_failed(self, sentence: str, details: str) -> None:
        log.error("%s run failed: %s\n%s", self.name, sentence, details)
        self.state = "failed"
        self._show_verdict()
        self.failed.emit(f"{self.name}: {sentence}", details)

    @Slot(int)
    def _on_finished(self, generation: int) -> None:
        handle = self.pool.retire(generation)
        if handle is not None and handle is self.handle:
            self.handle = None
            if self.state != "failed":
                self.state = "finished"
            self._show_verdict()
            self.changed.emit()

    # ---- header ----------------------------------------------------------------------------
    def _show_verdict(self) -> None:
        s = self.last_snapshot
        if s is None:
            self.verdict.setText("waiting for the first step…" if self.state == "running" else "")
            self.verdict.setStyleSheet("")
            self.numbers.setText("")
            return
        first = s.first_nonfinite_grad_step
        if first is None:
            self.verdict.setText("✔ gradients finite")
            self.verdict.setStyleSheet(_FINITE_STYLE)
        else:
            self.verdict.setText(f"✖ NaN/Inf gradient first at step {first}")
            self.verdict.setStyleSheet(_NAN_STYLE)
        loss = f"{s.loss:.4g}" if math.isfinite(s.loss) else str(s.loss)
        self.numbers.setText(f"step {s.step:,} · loss {loss} · {self.state}")
