"""Model work off the GUI thread: one plain thread per task, results relayed as signals.

A ``torch.load`` cannot be interrupted, so a task is never stopped: each carries the
generation it was started for, and the receiver drops results of older generations.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import traceback
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from gradviz.core.errors import GradvizError
from gradviz.gui.failures import describe_failure

log = logging.getLogger(__name__)

HASH_CHUNK_BYTES = 1 << 20


def file_sha256(path: str) -> str:
    """The SHA-256 of the file's bytes, as 64 hex digits (read in 1 MiB chunks)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(HASH_CHUNK_BYTES), b""):
                digest.update(chunk)
    except OSError as exc:
        raise GradvizError(f"Could not read {path!r} to check it: {exc.strerror}.") from exc
    return digest.hexdigest()


def describe_model_failure(exc: BaseException, path: str) -> str:
    """One plain sentence for a failed open: gradviz's own message, else a generic one."""
    return describe_failure(
        exc,
        f"gradviz could not open {path!r}",
        f"Opening {path!r} ran out of memory; the model is too large for this machine.",
        then="The file may be damaged or not a model; the details say more.",
    )


class ModelTasks(QObject):
    """Runs callables on background threads; ``finished(generation, kind, value)`` or
    ``failed(generation, kind, sentence, details)`` arrive on the GUI thread.

    Connect the signals to ``@Slot`` methods of a GUI-thread QObject: the emit happens on
    the task's thread, and only a slot of a GUI-thread object is queued to the GUI.
    """

    finished = Signal(int, str, object)
    failed = Signal(int, str, str, str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._threads: list[threading.Thread] = []

    def submit(self, generation: int, kind: str, path: str, work: Callable[[], Any]) -> None:
        """Run ``work()`` on a new thread; its value or its failure is signalled."""
        thread = threading.Thread(
            target=self._run,
            args=(generation, kind, path, work),
            name=f"gradviz-model-{kind}",
            daemon=True,  # an uninterruptible load must not keep the process alive
        )
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _run(self, generation: int, kind: str, path: str, work: Callable[[], Any]) -> None:
        try:
            value = work()
        except BaseException as exc:  # noqa: BLE001 - a hostile file may raise anything
            log.info("model task %s failed for %s", kind, path, exc_info=True)
            self.failed.emit(generation, kind, describe_model_failure(exc, path),
                             traceback.format_exc())  # fmt: skip
            return
        self.finished.emit(generation, kind, value)

    def running(self) -> int:
        """How many task threads are still working."""
        return sum(t.is_alive() for t in self._threads)

    def join(self, timeout_s: float) -> None:
        """Wait for the task threads (each up to ``timeout_s``)."""
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads = [t for t in self._threads if t.is_alive()]
