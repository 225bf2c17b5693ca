"""The one way the app runs a call off the GUI thread (a model load, torch's import, a
diagnosis, ...): ``BackgroundTasks.submit(generation, kind, work, describe)``.

Each call runs on its own Python thread. Its value or its failure comes back as a signal that is
delivered on the GUI thread, because the receiving slots belong to ``BackgroundTasks``, a
GUI-thread QObject (a signal connected to a plain function would run in the worker). A
failure becomes one plain sentence through ``describe`` (built on ``gui.failures``).

Latest wins: results of a generation older than the newest submitted, or than one passed
to ``supersede``, are dropped. A call that cannot be interrupted (``torch.load``) simply
finishes in the background and is thrown away; a call that can stop early polls
``is_stale(generation)``.

superqt's ``create_worker`` is not used: its worker wraps the call in
``warnings.catch_warnings()`` and replaces ``warnings.showwarning`` process-wide from the
worker thread, which races with Diagnose's own warning capture, and its pool threads
outlive the work. Here each thread is referenced until it has finished, and ``shutdown``
asks for a stop, waits, and only then lets go.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal, Slot

from gradviz.gui.common.failures import describe_failure

log = logging.getLogger(__name__)


def describe_unexpected(exc: BaseException) -> str:
    """The default sentence for a failed background call."""
    return describe_failure(
        exc,
        "The background work stopped because of an unexpected error",
        "The background work ran out of memory.",
    )


class _TaskThread:
    """Runs one call on a plain Python thread and keeps its outcome; ``ended(self)`` is
    called from that thread as its last act (``BackgroundTasks`` relays it to the GUI
    thread through a queued signal). No Qt object lives or dies on the task's thread."""

    def __init__(
        self,
        generation: int,
        kind: str,
        work: Callable[[], Any],
        describe: Callable[[BaseException], str],
        ended: Callable[[_TaskThread], None],
    ) -> None:
        self.generation = generation
        self.kind = kind
        self.value: object = None
        #: (sentence, details) when the call raised, else None.
        self.failure: tuple[str, str] | None = None
        self._work = work
        self._describe = describe
        self._ended = ended
        self._thread = threading.Thread(target=self.run, name=f"gradviz-{kind}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wait(self, timeout_ms: int | None = None) -> bool:
        """Join the thread; False when it is still running after ``timeout_ms``."""
        self._thread.join(None if timeout_ms is None else timeout_ms / 1000)
        return not self._thread.is_alive()

    def run(self) -> None:
        try:
            self.value = self._work()
        except BaseException as exc:  # noqa: BLE001 - every failure must reach the GUI
            log.info("background %s failed", self.kind, exc_info=True)
            try:
                sentence = self._describe(exc)
            except Exception:  # noqa: BLE001 - a describer must not lose the failure
                sentence = describe_unexpected(exc)
            self.failure = (sentence, traceback.format_exc())
        finally:
            # The call's closure is let go of on the GUI thread (``BackgroundTasks._release``),
            # never here: it may hold the last reference to a Qt object (a bound method of a
            # closing window's QObject), which must not be destroyed on this thread.
            self._ended(self)


class BackgroundTasks(QObject):
    """Runs calls on background threads; connect ``succeeded(generation, kind, value)`` and
    ``failed(generation, kind, sentence, details)`` to slots of GUI-thread objects.

    Both arrive on the GUI thread, only for the newest generation (latest wins), and never
    after ``shutdown``.
    """

    succeeded = Signal(int, str, object)
    failed = Signal(int, str, str, str)
    _ended = Signal(object)  # emitted on a task's thread, delivered on the GUI thread

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._threads: set[_TaskThread] = set()
        self._lock = threading.Lock()
        self._latest = -1
        self._stopping = False
        self._ended.connect(self._on_thread_ended, Qt.ConnectionType.QueuedConnection)

    # ---- GUI thread ------------------------------------------------------------------------
    def submit(
        self,
        generation: int,
        kind: str,
        work: Callable[[], Any],
        describe: Callable[[BaseException], str] = describe_unexpected,
    ) -> None:
        """Run ``work()`` on a new thread; a newer ``generation`` makes older ones stale."""
        if self._stopping:
            return
        self.supersede(generation)
        thread = _TaskThread(generation, kind, work, describe, self._ended.emit)
        self._threads.add(thread)  # referenced until finished and passed on
        thread.start()

    def supersede(self, generation: int) -> None:
        """Results of generations older than ``generation`` are dropped from now on."""
        with self._lock:
            self._latest = max(self._latest, generation)

    def running(self) -> int:
        """How many task threads are held: working, or ended with an outcome not yet passed on."""
        return len(self._threads)

    def shutdown(self, timeout_s: float = 30.0) -> bool:
        """Make every task stale, wait for the threads and let go of them. True when all
        finished within ``timeout_s`` each; a call that takes longer (a ``torch.load`` or a
        diagnosis step cannot be interrupted) is waited for anyway, with a warning, because
        dropping a running QThread aborts the process. Safe to call more than once."""
        with self._lock:
            self._stopping = True
        in_time = True
        for thread in list(self._threads):
            if not thread.wait(int(timeout_s * 1000)):
                in_time = False
                log.warning("a background %s is finishing a long step; waiting for it", thread.kind)
                thread.wait()
            self._release(thread)
        return in_time

    # ---- any thread ------------------------------------------------------------------------
    def is_stale(self, generation: int) -> bool:
        """Whether ``generation``'s result would be dropped (a stop point for long calls)."""
        with self._lock:
            return self._stopping or generation < self._latest

    # ---- slots (GUI thread) ----------------------------------------------------------------
    @Slot(object)
    def _on_thread_ended(self, thread: _TaskThread) -> None:
        """Join and let go of the thread first (``running()`` no longer counts it), then
        pass its outcome on unless it is stale."""
        if thread not in self._threads:
            return  # let go of by shutdown already
        thread.wait()  # its run() has returned: the join is immediate
        self._release(thread)
        if self.is_stale(thread.generation):
            log.info("dropping a superseded %s result", thread.kind)
        elif thread.failure is not None:
            self.failed.emit(thread.generation, thread.kind, *thread.failure)
        else:
            self.succeeded.emit(thread.generation, thread.kind, thread.value)

    def _release(self, thread: _TaskThread) -> None:
        """Let go of a finished thread and its call's closure (destroyed here, on the GUI
        thread, when unreferenced)."""
        thread._work = None
        self._threads.discard(thread)
