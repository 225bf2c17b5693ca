"""Connects the model features to the app: menu actions, drops, recent models, the model
panel's place beside the explorer, and File > Save network."""

from __future__ import annotations

import logging
import os
from typing import Any

from PySide6.QtCore import QObject, Qt, Slot
from PySide6.QtWidgets import QDockWidget, QFileDialog

from gradviz.core.errors import GradvizError
from gradviz.gui.models import recent_models
from gradviz.gui.models.open_model import ModelOpener

log = logging.getLogger(__name__)

SAVE_FILTER = "gradviz model files (*.safetensors)"


class ModelActions(QObject):
    """Owns the ModelOpener of a FitController's window and answers the File menu's model
    entries. ``choose_save_path`` asks where to save (tests replace it)."""

    def __init__(self, controller: Any) -> None:
        super().__init__(controller)
        self.controller = controller
        window = controller.window
        self.window = window
        self.opener = ModelOpener(
            window,
            controller.settings,
            controller.show_error,
            send_network=self._send_network,
            panel=getattr(window, "model_panel", None),
        )
        self.choose_save_path = self._choose_save_path
        self.saved_paths: list[str] = []  # files written by Save network, oldest first
        self._sent_label = ""
        self._pending_save: tuple[int, str] | None = None
        self._listening: set[int] = set()
        self._place_panel()
        a = window.actions
        a["open_model"].triggered.connect(self.opener.choose_and_open)
        a["save_network"].triggered.connect(self._on_save_network_triggered)
        window.fileDropped.connect(self._on_file_dropped)
        window.recentModelChosen.connect(self._on_file_dropped)
        window.set_recent_models(recent_models.read(controller.settings))
        self.opener.stateChanged.connect(self._on_opener_state_changed)
        self.opener.modelShown.connect(self._on_model_shown)
        controller.stateChanged.connect(self.update_actions)
        pages = getattr(window, "pages", None)
        if pages is not None:
            pages.bar.currentChanged.connect(self.update_actions)

    @property
    def explorer(self) -> Any:
        return getattr(self.window, "explorer", None)

    def _place_panel(self) -> None:
        """The window places the panel beside the explorer; without one, it gets a dock."""
        if self.opener.panel.parent() is not None:
            return
        dock = QDockWidget("Model file", self.window)
        dock.setObjectName("dock-model")
        dock.setWidget(self.opener.panel)
        self.window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
        self.window.tabifyDockWidget(self.window.docks["loss"], dock)
        self.window.docks["loss"].raise_()
        self.window.docks["model"] = dock
        self.window.view_menu.addAction(dock.toggleViewAction())
        self.dock = dock

    # ---- opening -------------------------------------------------------------------------
    @Slot(str)
    def _on_file_dropped(self, path: str) -> None:
        self.opener.open_path(path)

    def _send_network(self, module, label, spec, in_dim, out_dim) -> None:
        explorer = self.explorer
        self._sent_label = label
        if explorer is None:
            return
        explorer.set_network(module, label, spec, in_dim, out_dim)

    @Slot(object)
    def _on_model_shown(self, _info: object) -> None:
        """Bring the model panel forward once a model is on screen."""
        pages = getattr(self.window, "pages", None)
        if pages is not None:
            index = pages.stack.indexOf(self.opener.panel.parentWidget())
            if index >= 0:
                pages.show_page(index + 1)  # the page where the panel sits (0 is the lab)
        dock = getattr(self, "dock", None)
        if dock is not None:
            dock.show()
            dock.raise_()

    @Slot(str)
    def _on_opener_state_changed(self, _state: str) -> None:
        self.update_actions()

    @Slot()
    def update_actions(self) -> None:
        self.window.actions["save_network"].setEnabled(self.save_source() is not None)
        if self._pending_save is not None and self._run_worker() is None:
            self._pending_save = None
            self.controller.show_error(
                "The run ended before its network could be copied, so nothing was saved; "
                "save while the run is running or paused.",
                "",
            )

    # ---- saving --------------------------------------------------------------------------
    def save_source(self) -> str | None:
        """What File > Save network writes: ``"run"`` (the fit run's coordinate network,
        preferred while the lab shows), ``"file"`` (the opened model the explorer shows),
        or None when there is no network."""
        run = self._run_worker() is not None
        opened = self.opener.current_network() is not None
        explorer = self.explorer
        if opened and explorer is not None and hasattr(explorer, "network_label"):
            opened = explorer.network_label() == self._sent_label  # not a spec typed since
        pages = getattr(self.window, "pages", None)
        on_lab = pages is None or pages.current() == 0
        if run and (on_lab or not opened):
            return "run"
        return "file" if opened else None

    def _run_worker(self) -> Any:
        """The live fit worker when its run computes coordinates with a network."""
        handle = self.controller.handle
        if handle is None or not getattr(handle.worker.config, "net", None):
            return None
        return handle.worker

    @Slot()
    def _on_save_network_triggered(self) -> None:
        source = self.save_source()
        if source is None:
            return
        what = "coordinate-network" if source == "run" else self._sent_label
        path = self.choose_save_path(what)
        if path:
            self.save_network(path)

    def save_network(self, path: str) -> bool:
        """Write the network as gradviz's model file (the run's: once the worker has sent a
        copy of its weights). Errors go to the error dialog. True when started or done."""
        source = self.save_source()
        if source == "run":
            worker = self._run_worker()
            self._pending_save = (worker.generation, path)
            if worker.generation not in self._listening:
                self._listening.add(worker.generation)
                worker.networkCopied.connect(self._on_network_copied)
            worker.request_network()
            return True
        current = self.opener.current_network()
        if source != "file" or current is None:
            return False
        return self._write(path, *current)

    @Slot(int, object, object)
    def _on_network_copied(self, generation: int, spec: Any, state: dict) -> None:
        pending, self._pending_save = self._pending_save, None
        if pending is None or pending[0] != generation:
            return
        try:
            dtype = next(iter(state.values())).dtype
            module = spec.build(seed=0, dtype=dtype)
            module.load_state_dict(state)
        except Exception as exc:  # noqa: BLE001 - shown, never raised into Qt
            self.controller.show_error(f"The network could not be copied: {exc}", "")
            return
        self._write(pending[1], spec, module)

    def _write(self, path: str, spec: Any, module: Any) -> bool:
        from gradviz.core.networks import save_network

        try:
            save_network(path, spec, module)
        except GradvizError as exc:
            self.controller.show_error(str(exc), "")
            return False
        self.saved_paths.append(path)
        self.window.statusBar().showMessage(f"Saved the network to {path}", 8000)
        return True

    def _choose_save_path(self, what: str) -> str:
        stem = os.path.splitext(what)[0] or "network"
        path, _ = QFileDialog.getSaveFileName(
            self.window, "Save network", f"{stem}.safetensors", SAVE_FILTER
        )
        return path

    def shutdown(self, timeout_s: float = 30.0) -> None:
        self.opener.shutdown(timeout_s)
