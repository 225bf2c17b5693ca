"""The one way the app runs work off the GUI thread: results on the GUI thread, failures as
one sentence, superseded results dropped, and a shutdown that leaves no thread running."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, QThread, Slot

from gradviz.core.common.errors import GradvizError
from gradviz.gui.common.background import BackgroundTasks

TIMEOUT_MS = 20_000


class Receiver(QObject):
    """A GUI-thread object, as the app's receivers are; records where each signal ran."""

    def __init__(self, tasks: BackgroundTasks) -> None:
        super().__init__()
        self.results: list[tuple[int, str, object, bool]] = []
        self.failures: list[tuple[int, str, str, str]] = []
        tasks.succeeded.connect(self.on_succeeded)
        tasks.failed.connect(self.on_failed)

    @Slot(int, str, object)
    def on_succeeded(self, generation: int, kind: str, value: object) -> None:
        on_gui = QThread.currentThread() is self.thread()
        self.results.append((generation, kind, value, on_gui))

    @Slot(int, str, str, str)
    def on_failed(self, generation: int, kind: str, sentence: str, details: str) -> None:
        self.failures.append((generation, kind, sentence, details))


def test_a_result_computed_off_the_gui_thread_arrives_on_the_gui_thread(qtbot):
    tasks = BackgroundTasks()
    receiver = Receiver(tasks)
    gui_thread = threading.get_ident()
    tasks.submit(1, "square", lambda: (threading.get_ident(), 7 * 7))
    qtbot.waitUntil(lambda: bool(receiver.results), timeout=TIMEOUT_MS)
    generation, kind, (worker_thread, value), on_gui = receiver.results[0]
    assert (generation, kind, value) == (1, "square", 49)
    assert worker_thread != gui_thread  # the work ran elsewhere...
    assert on_gui  # ...and its result reached the GUI thread's slot
    qtbot.waitUntil(lambda: tasks.running() == 0, timeout=TIMEOUT_MS)
    assert tasks.shutdown()


def test_a_failure_becomes_one_plain_sentence_with_details(qtbot):
    tasks = BackgroundTasks()
    receiver = Receiver(tasks)

    def fail_own():
        raise GradvizError("The file is not a model.")

    def fail_bug():
        raise KeyError("weights")

    tasks.submit(1, "own", fail_own)
    qtbot.waitUntil(lambda: bool(receiver.failures), timeout=TIMEOUT_MS)
    tasks.submit(2, "bug", fail_bug)
    qtbot.waitUntil(lambda: len(receiver.failures) == 2, timeout=TIMEOUT_MS)
    assert receiver.failures[0][2] == "The file is not a model."
    _, kind, sentence, details = receiver.failures[1]
    assert kind == "bug" and sentence.startswith("The background work stopped")
    assert "KeyError" in sentence and "Traceback" in details
    assert tasks.shutdown() and not receiver.results


def test_a_superseded_result_is_dropped_and_the_newest_kept(qtbot):
    tasks = BackgroundTasks()
    receiver = Receiver(tasks)
    release_old = threading.Event()
    tasks.submit(1, "old", lambda: release_old.wait(TIMEOUT_MS / 1000) and "old")
    tasks.submit(2, "new", lambda: "new")
    qtbot.waitUntil(lambda: bool(receiver.results), timeout=TIMEOUT_MS)
    assert tasks.is_stale(1) and not tasks.is_stale(2)
    release_old.set()  # the old call finishes after the new one...
    qtbot.waitUntil(lambda: tasks.running() == 0, timeout=TIMEOUT_MS)
    qtbot.wait(0)  # deliver whatever the old thread queued
    assert [r[2] for r in receiver.results] == ["new"]  # ...and is thrown away
    tasks.supersede(3)  # a cancel: nothing newer is submitted
    tasks.submit(2, "late", lambda: "late")
    qtbot.waitUntil(lambda: tasks.running() == 0, timeout=TIMEOUT_MS)
    assert tasks.shutdown()
    assert [r[2] for r in receiver.results] == ["new"]


def test_shutdown_waits_for_a_running_task_and_leaves_no_thread(qtbot):
    tasks = BackgroundTasks()
    receiver = Receiver(tasks)
    started, finished = threading.Event(), threading.Event()

    def work():
        started.set()
        # A long call that looks at its stop point, as the explorer's jobs do.
        while not tasks.is_stale(1):
            threading.Event().wait(0.01)
        finished.set()
        return "stopped early"

    tasks.submit(1, "long", work)
    assert started.wait(TIMEOUT_MS / 1000)
    assert tasks.running() == 1
    assert tasks.shutdown(timeout_s=TIMEOUT_MS / 1000)
    assert finished.is_set() and tasks.running() == 0
    qtbot.wait(0)
    assert not receiver.results  # nothing arrives after shutdown
    tasks.submit(2, "after", lambda: "after")  # refused once shut down
    assert tasks.running() == 0


def test_shutdown_waits_past_its_timeout_for_a_call_that_cannot_stop(qtbot):
    tasks = BackgroundTasks()
    started, finished = threading.Event(), threading.Event()

    def uninterruptible():  # as a torch.load: it never looks at a stop point
        started.set()
        threading.Event().wait(0.3)
        finished.set()

    tasks.submit(1, "load", uninterruptible)
    assert started.wait(TIMEOUT_MS / 1000)
    assert not tasks.shutdown(timeout_s=0.01)  # not in time...
    assert finished.is_set() and tasks.running() == 0  # ...but never dropped while running


class Owned:
    """Stands for a Qt object a call's closure may hold last: records where it is freed."""

    freed_on: list[int] = []

    def __del__(self) -> None:
        Owned.freed_on.append(threading.get_ident())


def test_the_calls_closure_is_let_go_of_on_the_gui_thread(qtbot):
    tasks = BackgroundTasks()
    receiver = Receiver(tasks)
    Owned.freed_on = []
    owned = Owned()
    tasks.submit(1, "hold", lambda held=owned: type(held).__name__)
    del owned  # the closure now holds the last reference
    qtbot.waitUntil(lambda: bool(receiver.results), timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: tasks.running() == 0, timeout=TIMEOUT_MS)
    assert Owned.freed_on == [threading.get_ident()]  # freed, and on this (the GUI) thread
    assert tasks.shutdown()
