"""Runs explorer jobs off the GUI thread through ``gui.background``; the newest job wins.

Each job runs as one background task carrying its generation. A newer job makes the one in
flight stale: that one stops at its next stage boundary (``run_job``'s ``should_stop``) and
its outcome is dropped. Results and failures leave as signals carrying the job's
generation, delivered on the GUI thread; a failure is one sentence from ``gui.failures``.

``hold`` keeps jobs from computing (Diagnose needs it: anomaly mode is process-wide): a job
in flight is abandoned at its next stage and taken up again on ``release``, as is a job
submitted meanwhile; ``idle`` is set whenever no job is being computed.
"""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal, Slot

from gradviz.core.explorer.jobs import ExplorerJob
from gradviz.gui.common.background import BackgroundTasks
from gradviz.gui.common.failures import describe_failure

#: What a job returns when a hold abandoned it (it runs again on release).
_HELD = object()


def describe_explorer_failure(exc: BaseException) -> str:
    return describe_failure(
        exc,
        "The Jacobians could not be computed",
        "The computation ran out of memory; try a smaller batch, grid or network.",
    )


class ExplorerThread(QObject):
    """Starts explorer jobs: ``submit``, ``hold``/``release``, ``shutdown`` (stop + join).

    Connect ``resultReady(generation, result)`` and ``failed(generation, sentence,
    details)`` to ``@Slot`` methods of GUI-thread objects. ``worker`` is this object (the
    thing Diagnose waits on through ``idle``).
    """

    resultReady = Signal(int, object)  # generation, ExplorerResult
    failed = Signal(int, str, str)  # generation, sentence, details

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._tasks = BackgroundTasks(self)
        self._tasks.succeeded.connect(self._on_task_done)
        self._tasks.failed.connect(self._on_task_failed)
        self._lock = threading.Lock()
        self._held = threading.Event()
        self._computing = 0
        self._waiting: tuple[int, ExplorerJob] | None = None  # held back by a hold
        self._started = False
        self._shut_down = False
        #: Set while no job is being computed (read from any thread; Diagnose waits on it).
        self.idle = threading.Event()
        self.idle.set()
        #: Generation of the job most recently taken up (read from any thread).
        self.started_generation = -1

    @property
    def worker(self) -> ExplorerThread:
        return self

    @property
    def computing(self) -> bool:
        """Whether a job is being computed right now (read from any thread)."""
        return not self.idle.is_set()

    @property
    def held(self) -> bool:
        return self._held.is_set()

    @property
    def waiting(self) -> bool:
        """Whether a job is held back by a hold, to run on release (GUI thread)."""
        return self._waiting is not None

    @property
    def threads_held(self) -> int:
        """Job threads still held: computing, or ended with an outcome not passed on yet
        (0: no result of any job can arrive any more)."""
        return self._tasks.running()

    # ---- GUI thread ------------------------------------------------------------------------
    def start(self) -> None:
        self._started = True

    def submit(self, generation: int, job: ExplorerJob) -> None:
        """Compute ``job``; it makes any older job stale."""
        if self._shut_down:
            return
        self.start()
        self._tasks.supersede(generation)
        if self.held:
            self._waiting = (generation, job)
            return
        self._waiting = None
        with self._lock:
            self._computing += 1
            self.idle.clear()
        self._tasks.submit(
            generation, "jacobians", lambda: self._run(generation, job), describe_explorer_failure
        )

    def hold(self) -> ExplorerThread:
        """Compute nothing until ``release``; wait on ``idle`` for a job in flight to stop."""
        self._held.set()
        return self

    def release(self) -> None:
        """Compute again: a job held back (or abandoned by the hold) runs now."""
        self._held.clear()
        waiting, self._waiting = self._waiting, None
        if waiting is not None:
            self.submit(*waiting)

    def is_running(self) -> bool:
        """Whether jobs are accepted: from the first submit until ``shutdown``."""
        return self._started and not self._shut_down

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Stop the job in flight (at its next stage) and join its thread; True when done.
        Safe to call more than once."""
        self._shut_down = True
        self._waiting = None
        return self._tasks.shutdown(timeout_ms / 1000)

    # ---- job thread ------------------------------------------------------------------------
    def _run(self, generation: int, job: ExplorerJob) -> object:
        """Compute ``job``; torch is imported here, off the GUI thread."""
        from gradviz.core.explorer.jobs import Stopped, run_job

        self.started_generation = generation
        try:
            return run_job(job, lambda: self.held or self._tasks.is_stale(generation))
        except Stopped:
            return (_HELD, job) if self.held else None
        finally:
            with self._lock:
                self._computing -= 1
                if self._computing == 0:
                    self.idle.set()

    # ---- outcomes (GUI thread) -------------------------------------------------------------
    @Slot(int, str, object)
    def _on_task_done(self, generation: int, _kind: str, value: object) -> None:
        if isinstance(value, tuple) and value and value[0] is _HELD:
            if self.held and self._waiting is None:
                self._waiting = (generation, value[1])  # runs again on release
            elif not self.held:
                self.submit(generation, value[1])  # released before the outcome arrived
            return
        if value is not None:
            self.resultReady.emit(generation, value)

    @Slot(int, str, str, str)
    def _on_task_failed(self, generation: int, _kind: str, sentence: str, details: str) -> None:
        self.failed.emit(generation, sentence, details)
