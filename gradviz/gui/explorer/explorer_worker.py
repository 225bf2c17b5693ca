"""Runs explorer jobs on one long-lived thread; the newest job wins.

``ExplorerWorker`` is a QObject moved to its own QThread. Jobs arrive through ``submit``
(any thread): a lock-protected "latest job" slot plus a ``threading.Event`` to wake the
loop, because a queued slot would not be delivered while the loop is busy. A job submitted
while another computes replaces any job still waiting, and the running one is abandoned at
its next stage boundary. Results and failures leave as signals carrying the job's
generation, so the tab drops whatever is stale. Every exception is caught and sent as
``failed``: nothing reaches ``sys.excepthook`` from here.

``hold`` keeps the loop from computing (Diagnose needs it: anomaly mode is process-wide): a
job in flight is abandoned at its next stage and taken up again on ``release``; ``idle``
is set whenever no job is being computed.
"""

from __future__ import annotations

import threading
import traceback

from PySide6.QtCore import QObject, QThread, Signal, Slot

from gradviz.core.explore import ExplorerJob
from gradviz.gui.failures import describe_failure

#: How long the idle loop waits for a job before looking at the stop flag again (seconds).
_IDLE_WAIT_S = 0.1


class ExplorerWorker(QObject):
    """The loop that computes jobs. Connect its signals to ``@Slot`` methods of GUI objects."""

    resultReady = Signal(int, object)  # generation, ExplorerResult
    failed = Signal(int, str, str)  # generation, sentence, details

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._pending: tuple[int, ExplorerJob] | None = None
        self._latest = -1
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._computing = threading.Event()
        self._held = threading.Event()
        #: Set while no job is being computed (read from any thread; Diagnose waits on it).
        self.idle = threading.Event()
        self.idle.set()
        #: Generation of the job most recently taken up (read from any thread).
        self.started_generation = -1

    @property
    def computing(self) -> bool:
        """Whether a job is being computed right now (read from any thread)."""
        return self._computing.is_set()

    # ---- any thread ----------------------------------------------------------------------
    def submit(self, generation: int, job: ExplorerJob) -> None:
        """Queue ``job``; it replaces a waiting job and makes a running one stale."""
        with self._lock:
            self._pending = (generation, job)
            self._latest = generation
        self._wake.set()

    def request_stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def hold(self) -> None:
        """Compute nothing until ``release``; wait on ``idle`` for a job in flight to stop."""
        with self._lock:  # with the loop's take-up under the same lock, idle cannot lie
            self._held.set()

    def release(self) -> None:
        """Compute again: a job held back (or abandoned by the hold) runs now."""
        with self._lock:
            self._held.clear()
        self._wake.set()

    @property
    def held(self) -> bool:
        return self._held.is_set()

    def _abandoned(self, generation: int) -> bool:
        with self._lock:
            return self._stop.is_set() or self._held.is_set() or generation != self._latest

    # ---- worker thread -------------------------------------------------------------------
    @Slot()
    def run(self) -> None:
        """Compute jobs until ``request_stop``; torch is imported here, on this thread."""
        from gradviz.core.explore import Stopped, run_job

        while not self._stop.is_set():
            self._wake.wait(_IDLE_WAIT_S)
            with self._lock:
                self._wake.clear()
                if self._held.is_set():
                    continue  # the waiting job stays waiting
                pending, self._pending = self._pending, None
                if pending is not None:
                    self.idle.clear()
            if pending is None or self._stop.is_set():
                self.idle.set()
                continue
            generation, job = pending
            self._computing.set()
            self.started_generation = generation
            try:
                result = run_job(job, lambda g=generation: self._abandoned(g))
            except Stopped:
                self._requeue_if_held(generation, job)
                continue
            except Exception as exc:  # every failure must reach the GUI as a signal
                self.failed.emit(
                    generation,
                    describe_failure(
                        exc,
                        "The Jacobians could not be computed",
                        "The computation ran out of memory; try a smaller batch, grid or network.",
                    ),
                    traceback.format_exc(),
                )
            else:
                self.resultReady.emit(generation, result)
            finally:
                self._computing.clear()
                self.idle.set()

    def _requeue_if_held(self, generation: int, job: ExplorerJob) -> None:
        """A job abandoned because of a hold (not superseded) runs again on release."""
        with self._lock:
            if self._held.is_set() and self._pending is None and generation == self._latest:
                self._pending = (generation, job)


class ExplorerThread(QObject):
    """Owns the worker and its QThread: ``start``, ``submit``, and ``shutdown`` (stop + join)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.worker = ExplorerWorker()
        self.thread = QThread()
        self.thread.setObjectName("gradviz-explorer")
        self.worker.moveToThread(self.thread)
        self.thread.started.connect(self.worker.run)
        # Deleted in its own thread as that thread ends (Qt's documented pattern), never
        # later from the GUI thread by the garbage collector.
        self.thread.finished.connect(self.worker.deleteLater)
        self._started = False

    def start(self) -> None:
        if not self._started:
            self._started = True
            self.thread.start()

    def submit(self, generation: int, job: ExplorerJob) -> None:
        self.start()
        self.worker.submit(generation, job)

    def hold(self) -> ExplorerWorker:
        """Hold the worker (see ``ExplorerWorker.hold``); returns it, to wait on ``idle``."""
        self.worker.hold()
        return self.worker

    def release(self) -> None:
        self.worker.release()

    def is_running(self) -> bool:
        return self.thread.isRunning()

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Stop the loop (the running job ends at its next stage) and join the thread.

        Returns True when the thread has finished. Safe to call more than once.
        """
        self.worker.request_stop()
        self.thread.quit()  # the loop returns to the thread's event loop; end that too
        finished = self.thread.wait(timeout_ms) if self._started else True
        return bool(finished)
