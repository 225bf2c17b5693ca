"""Opening a model file: inspect (off-thread), ask for trust where the file can run code,
load (off-thread), then show it in the model panel and hand it to the Jacobian explorer.

Every open is a new generation. Cancel (or a newer open) bumps the generation, so a load
that cannot be interrupted finishes in the background and its result is dropped. Trust is
asked for every open of a TorchScript or .pt2 file and never remembered.
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from PySide6.QtCore import QObject, QSettings, Qt, Signal, Slot
from PySide6.QtWidgets import QFileDialog, QInputDialog, QProgressDialog, QWidget

from gradviz.core.errors import GradvizError
from gradviz.core.modelio import LoadedModel, ModelInfo
from gradviz.gui.models.model_panel import ModelPanel
from gradviz.gui.models.model_worker import ModelTasks, file_sha256
from gradviz.gui.models.trust_dialog import TrustDialog
from gradviz.gui.settings import RecentFiles

log = logging.getLogger(__name__)

#: The settings key of the recently opened model files.
RECENT_MODELS_KEY = "recent_models"

MODEL_FILTER = "Model files (*.pt *.pth *.pt2 *.ckpt *.safetensors *.bin);;All files (*)"


@dataclass(frozen=True)
class OpenRequest:
    """What one open asks for: the file, the activation to assume, trust, input width."""

    path: str
    activation: str | None = None
    trust: bool = False
    in_dim: int | None = None


def _inspect(request: OpenRequest) -> tuple[ModelInfo, str | None]:
    """Describe the file (runs nothing from it); hash it when trust will be asked."""
    from gradviz.core.modelio import inspect_model

    info = inspect_model(request.path, activation=request.activation, assume_sequential=True)
    return info, (file_sha256(request.path) if info.needs_trust else None)


def _load(request: OpenRequest) -> LoadedModel:
    from gradviz.core.modelio import load_model

    return load_model(
        request.path,
        trust=request.trust,
        activation=request.activation,
        in_dim=request.in_dim,
        assume_sequential=True,  # the panel lists the order; a confirm button is to come
    )


class OpenState(enum.Enum):
    """Where opening a model file stands."""

    IDLE = "idle"
    INSPECTING = "inspecting"  # reading what the file holds
    ASKING_TRUST = "asking trust"  # the file can run code: the user decides
    LOADING = "loading"
    OPEN = "open"  # on the panel and in the explorer
    LISTED = "listed"  # on the panel only (it cannot run)
    CANCELLED = "cancelled"
    FAILED = "failed"


class ModelOpener(QObject):
    """The behaviour of File > Open model, drag-and-drop, Recent models and Save network.

    ``show_error(sentence, details)`` is the app's error dialog; ``send_network(module,
    label, spec, in_dim, out_dim)`` hands a runnable model to the explorer; ``panel`` shows
    the model (a new one when not given). ``ask_in_dim``
    asks for the input width of a program that does not declare it (tests replace it).
    Signals: ``modelShown(info)`` once a model is on screen, ``stateChanged(OpenState)``,
    ``recentChanged(list)``.
    """

    modelShown = Signal(object)
    stateChanged = Signal(object)  # OpenState
    recentChanged = Signal(object)  # the recent model files, newest first

    def __init__(
        self,
        window: QWidget,
        settings: QSettings,
        show_error: Callable[[str, str], Any],
        send_network: Callable[..., Any] | None = None,
        panel: ModelPanel | None = None,
    ) -> None:
        super().__init__(window)
        self.window = window
        self.settings = settings
        self.show_error = show_error
        self.send_network = send_network
        self.ask_in_dim: Callable[[ModelInfo, int], int | None] = self._ask_in_dim
        self.panel = panel if panel is not None else ModelPanel()
        self.generation = 0
        self.state = OpenState.IDLE
        self.request: OpenRequest | None = None
        self.loaded: LoadedModel | None = None
        self.wait_dialog: QProgressDialog | None = None
        self.trust_dialog: TrustDialog | None = None
        self._pending_info: ModelInfo | None = None
        self.tasks = ModelTasks(self)
        self.tasks.finished.connect(self._on_task_finished, Qt.ConnectionType.QueuedConnection)
        self.tasks.failed.connect(self._on_task_failed, Qt.ConnectionType.QueuedConnection)
        self.panel.activationChosen.connect(self._on_activation_chosen)

    # ---- commands ----------------------------------------------------------------------
    def choose_and_open(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Open model", "", MODEL_FILTER)
        if path:
            self.open_path(path)

    def open_path(self, path: str, activation: str | None = None) -> None:
        """Start opening ``path`` (drops whatever open was going)."""
        self._close_dialogs()
        self.generation += 1
        self.request = OpenRequest(os.path.abspath(path), activation=activation)
        self._show_wait(f"Reading {os.path.basename(path)}…")
        self._set_state(OpenState.INSPECTING)
        request = self.request
        self.tasks.submit(self.generation, "inspect", request.path, lambda: _inspect(request))

    @Slot()
    def cancel(self) -> None:
        """Close the wait; the running load finishes in the background and is dropped."""
        self.generation += 1
        self._close_dialogs()
        self._set_state(OpenState.CANCELLED)
        self.window.statusBar().showMessage("Opening the model was cancelled.", 5000)

    def current_network(self) -> tuple[Any, Any] | None:
        """(spec, module) of the open model where gradviz rebuilt it, else None."""
        if self.loaded is None or self.loaded.spec is None:
            return None
        return self.loaded.spec, self.loaded.module

    # ---- task results (GUI thread) -------------------------------------------------------
    @Slot(int, str, object)
    def _on_task_finished(self, generation: int, kind: str, value: object) -> None:
        if generation != self.generation or self.request is None:
            log.info("dropping a %s result of an open that was cancelled", kind)
            return
        if kind == "inspect":
            info, sha256 = value  # type: ignore[misc]
            self._on_inspected(info, sha256)
        elif kind == "load":
            self._on_loaded(value)  # type: ignore[arg-type]

    @Slot(int, str, str, str)
    def _on_task_failed(self, generation: int, kind: str, sentence: str, details: str) -> None:
        if generation != self.generation:
            return
        self._close_dialogs()
        self._set_state(OpenState.FAILED)
        dialog = self.show_error(sentence, details)
        if hasattr(dialog, "setWindowTitle"):
            dialog.setWindowTitle("gradviz: the model could not be opened")

    def _on_inspected(self, info: ModelInfo, sha256: str | None) -> None:
        assert self.request is not None
        if not info.runnable:
            self._close_dialogs()
            self._show(info, loaded=None)
            return
        if info.needs_trust:
            self._close_dialogs()
            self._ask_trust(info, sha256 or "")
            return
        self._submit_load(self.request)

    def _on_loaded(self, loaded: LoadedModel) -> None:
        assert self.request is not None
        info = loaded.info
        if info.in_dim is None:
            self._close_dialogs()
            guess = _first_input_width(info)
            width = self.ask_in_dim(info, guess)
            if not width:
                self._set_state(OpenState.CANCELLED)
                return
            self._show_wait(f"Loading {os.path.basename(info.path)}…")
            self._submit_load(replace(self.request, in_dim=int(width)))
            return
        self._close_dialogs()
        self._show(info, loaded)

    # ---- steps ---------------------------------------------------------------------------
    def _submit_load(self, request: OpenRequest) -> None:
        self.request = request
        self._set_state(OpenState.LOADING)
        if self.wait_dialog is not None:
            self.wait_dialog.setLabelText(f"Loading {os.path.basename(request.path)}…")
        self.tasks.submit(self.generation, "load", request.path, lambda: _load(request))

    def _ask_trust(self, info: ModelInfo, sha256: str) -> None:
        self._set_state(OpenState.ASKING_TRUST)
        dialog = TrustDialog(info.path, sha256, info.format, self.window)
        dialog.answered.connect(self._on_trust_answered)
        self.trust_dialog = dialog
        dialog.open()

    @Slot(bool)
    def _on_trust_answered(self, trusted: bool) -> None:
        dialog, self.trust_dialog = self.trust_dialog, None
        if dialog is not None:
            dialog.deleteLater()
        if self.request is None or self.state is not OpenState.ASKING_TRUST:
            return
        if not trusted:
            self._set_state(OpenState.CANCELLED)
            self.window.statusBar().showMessage("Not opened: the file was not trusted.", 8000)
            return
        self._show_wait(f"Loading {os.path.basename(self.request.path)}…")
        self._submit_load(replace(self.request, trust=True))

    def _show(self, info: ModelInfo, loaded: LoadedModel | None) -> None:
        assert self.request is not None
        self.panel.show_info(info, activation=self.request.activation or "identity")
        self.loaded = loaded
        self._remember(info.path)
        if loaded is not None and self.send_network is not None:
            label = os.path.basename(info.path)
            try:
                self.send_network(loaded.module, label, loaded.spec, info.in_dim, info.out_dim)
            except GradvizError as exc:
                self.show_error(str(exc), "")
        self._set_state(OpenState.OPEN if loaded is not None else OpenState.LISTED)
        self.modelShown.emit(info)

    def _remember(self, path: str) -> None:
        self.recentChanged.emit(RecentFiles(self.settings, RECENT_MODELS_KEY).add(path))

    @Slot(str)
    def _on_activation_chosen(self, activation: str) -> None:
        if self.request is not None and self.state in (OpenState.OPEN, OpenState.LISTED):
            self.open_path(self.request.path, activation=activation)

    # ---- dialogs -------------------------------------------------------------------------
    def _show_wait(self, text: str) -> None:
        if self.wait_dialog is None:
            dialog = QProgressDialog(text, "Cancel", 0, 0, self.window)
            dialog.setWindowTitle("Opening model")
            dialog.setObjectName("model-wait")
            dialog.setWindowModality(Qt.WindowModality.WindowModal)
            dialog.setMinimumDuration(0)
            dialog.setAutoClose(False)
            dialog.setAutoReset(False)
            dialog.canceled.connect(self.cancel)
            self.wait_dialog = dialog
        self.wait_dialog.setLabelText(text)
        self.wait_dialog.show()

    def _close_dialogs(self) -> None:
        dialog, self.wait_dialog = self.wait_dialog, None
        if dialog is not None:
            dialog.canceled.disconnect(self.cancel)
            dialog.hide()
            dialog.deleteLater()
        trust, self.trust_dialog = self.trust_dialog, None
        if trust is not None:
            trust.answered.disconnect(self._on_trust_answered)
            trust.reject()
            trust.deleteLater()

    def _ask_in_dim(self, info: ModelInfo, guess: int) -> int | None:
        width, ok = QInputDialog.getInt(
            self.window,
            "Input width",
            f"{os.path.basename(info.path)} does not declare its input width.\n"
            "How many inputs does it take?",
            max(guess, 1),
            1,
            1_000_000,
        )
        return width if ok else None

    def _set_state(self, state: OpenState) -> None:
        self.state = state
        self.stateChanged.emit(state)

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Drop any open in progress and wait for the task threads."""
        self.generation += 1
        self._close_dialogs()
        self.tasks.join(timeout_s)


def _first_input_width(info: ModelInfo) -> int:
    """The input width of the first 2-D weight, a good guess for a chain of Linear layers."""
    for layer in info.layers:
        shape = layer.shapes.get("weight")
        if shape is not None and len(shape) == 2:
            return int(shape[1])
    return 1
