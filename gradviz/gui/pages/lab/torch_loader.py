"""Imports torch and the core run behind the window (window first)."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from gradviz.gui.common.background import BackgroundTasks

log = logging.getLogger(__name__)

#: Longest wait for step 0's frame before warming up the optimizer anyway (milliseconds).
_WARM_UP_WAIT_MS = 15_000


class TorchLoader(QObject):
    """Imports torch and the core run off the GUI thread (``gui.background``).

    ``ready`` carries the devices that exist as (name, label) pairs; ``failed`` a plain
    sentence and the details. After ``ready`` a second task imports what the first
    optimizer step needs (torch._dynamo, seconds), once step 0 is on screen: the imports
    would compete with its forward and backward.
    """

    ready = Signal(object)
    failed = Signal(str, str)

    def __init__(self) -> None:
        super().__init__()
        self._tasks = BackgroundTasks(self)
        self._tasks.succeeded.connect(self._on_task_done)
        self._tasks.failed.connect(self._on_task_failed)
        self._warm_up_timer = QTimer(self)
        self._warm_up_timer.setSingleShot(True)
        self._warm_up_timer.setInterval(_WARM_UP_WAIT_MS)
        self._warm_up_timer.timeout.connect(self._warm_up)
        self._loaded = False
        self._frame_shown = False
        self._warming = False

    def start(self) -> None:
        self._tasks.submit(0, "torch-import", _import_torch, _describe_import_failure)

    @Slot(object)
    def first_frame_shown(self, _snapshot: object = None) -> None:
        """Step 0 is on screen: the optimizer's imports may now take the CPU."""
        self._frame_shown = True
        if self._loaded:
            self._warm_up()

    def join(self, timeout_s: float) -> None:
        """Start nothing more and wait for the task in flight (up to ``timeout_s``)."""
        self._warm_up_timer.stop()
        self._tasks.shutdown(timeout_s)

    @property
    def threads_held(self) -> int:
        """Task threads still held: importing, or ended with an outcome not passed on yet
        (0 after ``join``: neither ``ready`` nor ``failed`` can arrive any more)."""
        return self._tasks.running()

    @Slot()
    def _warm_up(self) -> None:
        self._warm_up_timer.stop()
        if not self._warming:
            self._warming = True
            self._tasks.submit(0, "optimizer-warm-up", _warm_up_optimizer)

    @Slot(int, str, object)
    def _on_task_done(self, _generation: int, kind: str, value: object) -> None:
        if kind != "torch-import":
            return
        self._loaded = True
        self.ready.emit(value)
        if self._frame_shown:
            self._warm_up()
        else:
            self._warm_up_timer.start()

    @Slot(int, str, str, str)
    def _on_task_failed(self, _generation: int, kind: str, sentence: str, details: str) -> None:
        if kind == "torch-import":
            log.error("importing torch failed\n%s", details)
            self.failed.emit(sentence, details)
        else:  # a warm-up only; the real run reports for itself
            log.warning("warming up the optimizer failed: %s\n%s", sentence, details)


def _import_torch() -> list[tuple[str, str]]:
    """Import torch and the run; the devices that exist as (name, label) pairs."""
    from gradviz.core.common.torch_import import import_torch

    import_torch()  # its libraries loaded without the GIL: the window keeps painting
    from gradviz.core.common.devices import available_devices, describe_device
    from gradviz.core.lab.fit import DistanceFitRun  # noqa: F401 - imported here, off the GUI

    return [(name, describe_device(name)) for name in available_devices()]


def _describe_import_failure(exc: BaseException) -> str:
    return (
        f"The compute engine (torch) could not be loaded: {exc}. Check the "
        "installation; the window works, but runs cannot start."
    )


def _warm_up_optimizer() -> None:
    """One tiny step pays the optimizer's lazy imports here, behind step 0's picture,
    instead of in the first step the user asks for."""
    from gradviz.core.lab.fit import DistanceFitRun
    from gradviz.core.settings.config import FitConfig

    DistanceFitRun(FitConfig(target="gaussian", n=3, dim=2, steps=1, device="cpu")).step()
