"""Imports torch and the core run behind the window (window first)."""

from __future__ import annotations

import logging
import threading
import traceback

from PySide6.QtCore import QObject, Signal, Slot

log = logging.getLogger(__name__)

#: Longest wait for step 0's frame before warming up the optimizer anyway (seconds).
_WARM_UP_WAIT_S = 15.0


class TorchLoader(QObject):
    """Imports torch and the core run on a background thread.

    ``ready`` carries the devices that exist as (name, label) pairs; ``failed`` a plain
    sentence and the details. After ``ready`` the thread goes on to import what the first
    optimizer step needs (torch._dynamo, seconds), while the app already shows step 0.
    """

    ready = Signal(object)
    failed = Signal(str, str)

    def __init__(self) -> None:
        super().__init__()
        self._thread = threading.Thread(target=self._load, name="gradviz-torch-import", daemon=True)
        self._frame_shown = threading.Event()

    def start(self) -> None:
        self._thread.start()

    @Slot(object)
    def first_frame_shown(self, _snapshot: object = None) -> None:
        """Step 0 is on screen: the optimizer's imports may now take the CPU (any thread)."""
        self._frame_shown.set()

    def join(self, timeout_s: float) -> None:
        self._frame_shown.set()  # nothing more to wait for
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _load(self) -> None:
        try:
            from gradviz.core.config import FitConfig
            from gradviz.core.devices import available_devices, describe_device
            from gradviz.core.fit import DistanceFitRun

            devices = [(name, describe_device(name)) for name in available_devices()]
        except BaseException as exc:  # noqa: BLE001 - the GUI must hear of any failure
            log.exception("importing torch failed")
            self.failed.emit(
                f"The compute engine (torch) could not be loaded: {exc}. Check the "
                "installation; the window works, but runs cannot start.",
                traceback.format_exc(),
            )
            return
        self.ready.emit(devices)
        # Step 0's forward and backward come first; the imports would compete with them.
        self._frame_shown.wait(_WARM_UP_WAIT_S)
        try:
            # One tiny step pays the optimizer's lazy imports here, behind step 0's
            # picture, instead of in the first step the user asks for.
            DistanceFitRun(FitConfig(n=3, dim=2, steps=1, device="cpu")).step()
        except Exception:  # noqa: BLE001 - a warm-up only; the real run reports for itself
            log.exception("warming up the optimizer failed")
