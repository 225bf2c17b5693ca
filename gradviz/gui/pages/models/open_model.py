"""Opening a model file: inspect (off-thread), ask for trust where the file can run code,
load (off-thread), then show it in the model panel and hand it to the Jacobian explorer.

Every open is a new generation. Cancel (or a newer open) bumps the generation, so a load
that cannot be interrupted finishes in the background and its result is dropped; a trusted
program's process is stopped (program_run). Trust is asked for every open of a TorchScript
or .pt2 file and never remembered.
"""

from __future__ import annotations

import enum
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from PySide6.QtCore import QObject, QSettings, Qt, Signal, Slot
from PySide6.QtWidgets import QFileDialog, QInputDialog, QProgressDialog, QWidget

from gradviz.core.common.errors import GradvizError
from gradviz.core.explorer.batches import parse_sample_shape
from gradviz.core.modelio import LoadedModel, ModelInfo
from gradviz.core.modelio.formats import BY_NAME, file_filter
from gradviz.core.modelio.input_shape import first_input_width
from gradviz.core.settings.program_limits import ProgramLimits
from gradviz.gui.common.background import BackgroundTasks
from gradviz.gui.common.settings import RecentFiles
from gradviz.gui.pages.models.model_class_dialog import ModelClassChoice, ModelClassDialog
from gradviz.gui.pages.models.model_panel import ModelPanel
from gradviz.gui.pages.models.model_worker import describe_model_failure, file_sha256
from gradviz.gui.pages.models.program_run import ProgramRun
from gradviz.gui.pages.models.trust_dialog import MODEL_CLASS, TrustDialog

log = logging.getLogger(__name__)

#: The settings key of the recently opened model files.
RECENT_MODELS_KEY = "recent_models"

#: Shown instead of a SHA-256 for a model class from a module on Python's path.
NOT_A_FILE = "(a module on Python's path, not one file)"

MODEL_FILTER = file_filter("Model files")


@dataclass(frozen=True)
class OpenRequest:
    """What one open asks for: the file, the activation to assume, trust, input width, and
    whether a module of a class of its own runs its layers in the listed order."""

    path: str
    activation: str | None = None
    trust: bool = False
    in_dim: int | None = None
    assume_sequential: bool = False
    #: the user's own class for a state_dict (File > Open with model class…)
    with_class: ModelClassChoice | None = None
    #: one sample's shape for a program that does not declare its input (a CNN's (3, H, W))
    in_shape: tuple[int, ...] | None = None


def _inspect(request: OpenRequest) -> tuple[ModelInfo, str | None]:
    """Describe the file (runs nothing from it); hash it, or the model class's Python file,
    when trust will be asked."""
    from gradviz.core.modelio import inspect_model

    info = inspect_model(
        request.path, activation=request.activation, assume_sequential=request.assume_sequential
    )
    code = request.with_class
    if code is not None:
        return info, (file_sha256(code.code_path) if code.code_path else NOT_A_FILE)
    return info, (file_sha256(request.path) if info.needs_trust else None)


def _load(request: OpenRequest, limits: ProgramLimits | None = None) -> LoadedModel:
    """The model ``request`` asks for; a trusted program runs within ``limits``, whose
    ``cancel`` flag stops it."""
    from gradviz.core.modelio import load_model

    code = request.with_class
    if code is not None:
        from gradviz.core.modelio.input_shape import with_input_shape

        loaded = load_model(
            request.path, trust=request.trust, model_class=code.model_class,
            model_args=code.model_args, limits=limits,
        )  # fmt: skip
        return with_input_shape(loaded, code.in_shape)
    if request.in_shape is not None:
        from gradviz.core.modelio.input_shape import with_input_shape

        loaded = load_model(
            request.path, trust=request.trust, activation=request.activation, limits=limits
        )
        return with_input_shape(loaded, request.in_shape)
    loaded = load_model(
        request.path,
        trust=request.trust,
        activation=request.activation,
        in_dim=request.in_dim,
        assume_sequential=request.assume_sequential,  # the user confirmed the listed order
        limits=limits,
    )
    if loaded.info.in_dim is None and loaded.info.in_shape is not None:
        # A .pt2 program declares its sample shape (a CNN's (3, 8, 8)): nothing to ask.
        from gradviz.core.modelio.input_shape import with_input_shape

        info = loaded.info
        if info.out_dim is not None:  # declared too: no run on zeros (its batch may be fixed)
            size = math.prod(info.in_shape)
            return replace(loaded, info=replace(info, in_dim=size))
        return with_input_shape(loaded, info.in_shape, "taken from the program's example input")
    return loaded


def _runs_a_program(request: OpenRequest | None) -> bool:
    """Whether loading ``request`` runs a trusted program (in a process of its own)."""
    return request is not None and request.trust and request.with_class is None


def _warm_up_for(info: ModelInfo, kind: str | None) -> None:
    """Where the trust asked for is ``info``'s file's own (``kind`` None) and the file is a
    program, start the program launcher while the question is read: once trusted, the
    program's process starts at once."""
    if kind is None and getattr(BY_NAME.get(info.format), "runs_code", False):
        from gradviz.core.modelio.program_process import warm_up

        warm_up()


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
    label, spec, in_dim, out_dim[, in_shape=])`` hands a runnable model to the explorer;
    ``panel`` shows the model (a new one when not given). ``ask_in_dim(info, guess)`` asks
    for the input of a program that does not declare it: a width (int) or the shape of one
    sample (a tuple such as (3, 32, 32)), None to cancel (tests replace it).
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
        self.ask_in_dim: Callable[[ModelInfo, int], int | tuple[int, ...] | None] = self._ask_in_dim
        self.panel = panel if panel is not None else ModelPanel()
        self.generation = 0
        self.state = OpenState.IDLE
        self.request: OpenRequest | None = None
        self.loaded: LoadedModel | None = None
        self.wait_dialog: QProgressDialog | None = None
        self.trust_dialog: TrustDialog | None = None
        self.model_class_dialog: ModelClassDialog | None = None
        self.tasks = BackgroundTasks(self)
        self.program_run = ProgramRun(self)  # a trusted program's seconds and its Cancel
        self.tasks.succeeded.connect(self._on_task_finished)
        self.tasks.failed.connect(self._on_task_failed)
        self.panel.activationChosen.connect(self._on_activation_chosen)
        self.panel.orderConfirmed.connect(self.run_in_listed_order)
        self.panel.modelClassWanted.connect(self.choose_model_class)
        self.panel.installedClassWanted.connect(self.use_installed_class)
        self._listed: tuple[ModelInfo, str] | None = None  # (info, SHA-256) on the panel

    # ---- commands ----------------------------------------------------------------------
    def choose_and_open(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Open model", "", MODEL_FILTER)
        if path:
            self.open_path(path)

    def open_path(
        self, path: str, activation: str | None = None, assume_sequential: bool = False
    ) -> None:
        """Start opening ``path`` (drops whatever open was going). ``assume_sequential``:
        the user confirmed that a module of a class of its own runs its layers in order."""
        self.program_run.stop()  # a program still loading for the open this one replaces
        self._close_dialogs()
        self.generation += 1
        self.request = OpenRequest(
            os.path.abspath(path), activation=activation, assume_sequential=assume_sequential
        )
        self._show_wait(f"Reading {os.path.basename(path)}…")
        self._set_state(OpenState.INSPECTING)
        request = self.request
        self._submit("inspect", request, _inspect)

    @Slot()
    def choose_model_class(self) -> None:
        """File > Open with model class…: ask for the weights, the class and its arguments
        (the weights of the open file filled in)."""
        weights = self.request.path if self.request is not None else ""
        dialog = ModelClassDialog(self.window, weights=weights)
        dialog.chosen.connect(self.open_with_class)
        dialog.finished.connect(dialog.deleteLater)
        self.model_class_dialog = dialog
        dialog.open()

    @Slot(object)
    def open_with_class(self, choice: ModelClassChoice) -> None:
        """Open ``choice.weights`` in the user's class: described first, then trust is asked
        (importing the class runs its code), then loaded strictly."""
        self.program_run.stop()  # a program still loading for the open this one replaces
        self._close_dialogs()
        self.generation += 1
        self.request = OpenRequest(choice.weights, with_class=choice)
        self._show_wait(f"Reading {os.path.basename(choice.weights)}…")
        self._set_state(OpenState.INSPECTING)
        request = self.request
        self._submit("inspect", request, _inspect)

    @Slot()
    def cancel(self) -> None:
        """Close the wait and stop a trusted program's process (other loads end unseen)."""
        self.generation += 1
        if self.program_run.stop() and _runs_a_program(self.request):
            self.panel.show_cancelled(os.path.basename(self.request.path))
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
        code = self.request.with_class
        if code is not None:  # the user's class runs the weights, whatever they chain to
            self._close_dialogs()
            self._ask_trust(info, sha256 or "", code.code_path or code.model_class, MODEL_CLASS)
            return
        if not info.runnable:
            self._close_dialogs()
            self._listed = (info, sha256 or "")
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
            answer = self.ask_in_dim(info, first_input_width(info) or 1)
            if not answer:
                self._set_state(OpenState.CANCELLED)
                return
            shape = (int(answer),) if isinstance(answer, int) else tuple(answer)
            again = (
                replace(self.request, in_dim=shape[0])
                if len(shape) == 1
                else replace(self.request, in_shape=shape)
            )
            self._show_wait(f"Loading {os.path.basename(info.path)}…")
            self._submit_load(again)
            return
        self._close_dialogs()
        self._show(info, loaded)

    # ---- steps ---------------------------------------------------------------------------
    def _submit(self, kind: str, request: OpenRequest, work: Callable[[OpenRequest], Any]) -> None:
        """Run ``work(request)`` off the GUI thread for the current open."""
        self.tasks.submit(
            self.generation,
            kind,
            lambda: work(request),
            lambda exc: describe_model_failure(exc, request.path),
        )

    def _submit_load(self, request: OpenRequest) -> None:
        self.request = request
        self._set_state(OpenState.LOADING)
        if self.wait_dialog is not None:
            self.wait_dialog.setLabelText(f"Loading {os.path.basename(request.path)}…")
        limits = self.program_run.start(self.wait_dialog, request.path, _runs_a_program(request))
        self._submit("load", request, lambda asked: _load(asked, limits))

    def _ask_trust(
        self, info: ModelInfo, sha256: str, path: str | None = None, kind: str | None = None
    ) -> None:
        """Ask before running code: the file's program, or its model class's (``kind``)."""
        self._set_state(OpenState.ASKING_TRUST)
        runs_as = info.runs_as if kind is None else None  # installed classes that would run
        _warm_up_for(info, kind)
        dialog = TrustDialog(path or info.path, sha256, kind or info.format, self.window, runs_as)
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
                shape = {} if info.in_shape is None else {"in_shape": info.in_shape}
                self.send_network(
                    loaded.module, label, loaded.spec, info.in_dim, info.out_dim, **shape
                )
            except GradvizError as exc:
                self.show_error(str(exc), "")
        self._set_state(OpenState.OPEN if loaded is not None else OpenState.LISTED)
        self.modelShown.emit(info)

    def _remember(self, path: str) -> None:
        self.recentChanged.emit(RecentFiles(self.settings, RECENT_MODELS_KEY).add(path))

    @Slot(str)
    def _on_activation_chosen(self, activation: str) -> None:
        request = self.request
        if request is not None and self.state in (OpenState.OPEN, OpenState.LISTED):
            self.open_path(request.path, activation, request.assume_sequential)

    @Slot()
    def run_in_listed_order(self) -> None:
        """The user confirmed the layer order the panel lists: reload running it so."""
        request = self.request
        if request is not None and self.state is OpenState.LISTED:
            self.open_path(request.path, request.activation, assume_sequential=True)

    def use_installed_class(self) -> None:
        """Run the listed module in the installed class it names, after the trust question."""
        if self._listed is not None and self.state is OpenState.LISTED:
            self._ask_trust(*self._listed)

    # ---- dialogs -------------------------------------------------------------------------
    def _show_wait(self, text: str) -> None:
        if self.wait_dialog is None:
            self.wait_dialog = _wait_dialog(text, self.window)
            self.wait_dialog.canceled.connect(self.cancel)
        self.wait_dialog.setLabelText(text)
        self.wait_dialog.show()

    def _close_dialogs(self) -> None:
        self.program_run.finish()  # the load ended, or its process was stopped before
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

    def _ask_in_dim(self, info: ModelInfo, guess: int) -> tuple[int, ...] | None:
        text, ok = QInputDialog.getText(
            self.window,
            "Input shape",
            f"{os.path.basename(info.path)} does not declare its input.\n"
            "Give the width of one input (8) or the shape of one sample (3,32,32):",
            text=str(guess),
        )
        if not ok:
            return None
        try:
            return parse_sample_shape(text)
        except GradvizError as exc:
            self.show_error(str(exc), "")
            return None

    def _set_state(self, state: OpenState) -> None:
        self.state = state
        self.stateChanged.emit(state)

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Drop any open in progress and wait for the task threads."""
        self.generation += 1
        self.program_run.stop()
        self._close_dialogs()
        self.tasks.shutdown(timeout_s)


def _wait_dialog(text: str, parent) -> QProgressDialog:
    """The window-modal "Opening model" wait with its Cancel, open until closed."""
    dialog = QProgressDialog(text, "Cancel", 0, 0, parent)
    dialog.setWindowTitle("Opening model")
    dialog.setObjectName("model-wait")
    dialog.setWindowModality(Qt.WindowModality.WindowModal)
    dialog.setMinimumDuration(0)
    dialog.setAutoClose(False)
    dialog.setAutoReset(False)
    return dialog
