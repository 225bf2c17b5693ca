"""The run session's worker slot: the current fit worker, its generation, the retiring ones.

``RunSession`` keeps the run's state and snapshots; this keeps the threads. Every launch
(and every ``clear``) starts a new generation, and what a worker of an older generation
still sends is dropped here, so the session only hears of its current run. Worker signals
arrive on this GUI-thread QObject (queued across the thread) and go on as its own signals.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.settings.config import FitConfig
from gradviz.gui.run.worker import FitWorker, FramePacer, WorkerPool


class WorkerSlot(QObject):
    """At most one current ``FitWorker``, plus the retiring ones whose threads are held.

    Signals carry the current generation's output only, except ``failed`` (any worker's,
    as the session has always reported) and ``runEnded`` (the current worker finished).
    """

    snapshotReady = Signal(object, float)  # Snapshot, wall-clock steps/s
    firstNanPinned = Signal(object)  # Snapshot of the exact first non-finite step
    failed = Signal(str, str)  # plain sentence, details
    runEnded = Signal()  # the current worker reported finished; the slot is empty
    workerRetired = Signal(int)  # any worker's thread was let go (its generation)
    networkReady = Signal(object)  # worker.NetworkCopy
    cellValuesReady = Signal(object)  # worker.CellValues

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._generation = 0
        self._pool = WorkerPool()
        self._pacer = FramePacer(self._pool, self)
        self._current: FitWorker | None = None

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def current(self) -> FitWorker | None:
        """The current run's worker while it runs (its thread-safe commands only)."""
        return self._current

    def workers(self) -> list[FitWorker]:
        """Every worker whose thread is still held (the current one and retiring ones)."""
        return self._pool.workers()

    def launch(
        self,
        config: FitConfig,
        paused: bool,
        frame_rate: float,
        run_factory: Callable[[FitConfig], Any] | None,
    ) -> FitWorker:
        """Start a worker for ``config`` as a new generation (the slot must be empty)."""
        self._generation += 1
        worker = FitWorker(
            config,
            self._generation,
            frame_rate=frame_rate,
            start_paused=paused,
            run_factory=run_factory,
            after=[w.ended for w in self._pool.workers()],  # old runs free their memory first
        )
        self._connect(worker)
        self._pacer.restart()
        self._pool.start(worker)
        self._current = worker
        return worker

    def _connect(self, worker: FitWorker) -> None:
        worker.snapshotReady.connect(self._on_snapshot)
        worker.firstNanPinned.connect(self._on_first_nan_pinned)
        worker.failed.connect(self._on_failed)
        worker.finished.connect(self._on_worker_finished)
        worker.networkReady.connect(self._on_network_ready)
        worker.cellValuesReady.connect(self._on_cell_values)

    def retire(self) -> None:
        """Ask the current worker to stop; its thread is joined when it reports finished."""
        if self._current is not None:
            self._current.request_stop()
            self._current = None

    def clear(self) -> None:
        """Retire the current worker and begin a new generation with none."""
        self.retire()
        self._generation += 1

    def join(self, timeout_s: float = 30.0) -> bool:
        """Stop every worker and join its thread; True when all threads have ended."""
        return self._pool.shutdown(timeout_s)

    def close(self, timeout_s: float = 30.0) -> bool:
        """``join`` every worker; what they had already queued is dropped (a new
        generation), as it must not reach a closed window's widgets."""
        self._current = None
        stopped = self._pool.shutdown(timeout_s)
        self._generation += 1
        return stopped

    # ---- worker signals (GUI thread) ----------------------------------------------------------
    @Slot(object, float)
    def _on_snapshot(self, snapshot: Snapshot, steps_per_second: float) -> None:
        arrived = time.perf_counter()
        if snapshot.generation == self._generation:
            self.snapshotReady.emit(snapshot, steps_per_second)
        # Every frame is acknowledged, stale or not, after the views have taken it.
        self._pacer.shown(snapshot.generation, arrived)

    @Slot(object)
    def _on_first_nan_pinned(self, snapshot: Snapshot) -> None:
        if snapshot.generation == self._generation:
            self.firstNanPinned.emit(snapshot)

    @Slot(str, str)
    def _on_failed(self, sentence: str, details: str) -> None:
        self.failed.emit(sentence, details)

    @Slot(int)
    def _on_worker_finished(self, generation: int) -> None:
        handle = self._pool.retire(generation)
        if handle is not None and handle.worker is self._current:
            self._current = None
            self.runEnded.emit()
        self.workerRetired.emit(generation)

    @Slot(object)
    def _on_network_ready(self, network: Any) -> None:
        if network.generation == self._generation:
            self.networkReady.emit(network)

    @Slot(object)
    def _on_cell_values(self, values: Any) -> None:
        if values.generation == self._generation:
            self.cellValuesReady.emit(values)
