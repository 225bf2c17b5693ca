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
            window, controller.settings, controller.show_error, send_network=self._send_network
        )
        self.choose_save_path = self._choose_save_path
        self._place_panel()
        a = window.actions
        a["open_model"].triggered.connect(self.opener.choose_and_open)
        a["save_network"].triggered.connect(self._on_save_network_triggered)
        window.fileDropped.connect(self._on_file_dropped)
        window.recentModelChosen.connect(self._on_file_dropped)
        window.set_recent_models(recent_models.read(controller.settings))
        self.opener.stateChanged.connect(self._on_opener_state_changed)
        self.opener.modelShown.connect(self._on_model_shown)

    @property
    def explorer(self) -> Any:
        return getattr(self.window, "explorer", None)

    def _place_panel(self) -> None:
        """Beside the explorer where the window has one, else a dock of its own."""
        explorer, pages = self.explorer, getattr(self.window, "pages", None)
        if explorer is not None and pages is not None and hasattr(explorer, "add_side_panel"):
            explorer.add_side_panel(self.opener.panel)
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
        if explorer is None:
            return
        explorer.set_network(module, label, spec, in_dim, out_dim)
        pages = getattr(self.window, "pages", None)
        if pages is not None:
            pages.show_page(1)

    @Slot(object)
    def _on_model_shown(self, _info: object) -> None:
        """Bring the model panel forward once a model is on screen."""
        dock = getattr(self, "dock", None)
        if dock is not None:
            dock.show()
            dock.raise_()

    @Slot(str)
    def _on_opener_state_changed(self, _state: str) -> None:
        self.update_actions()

    def update_actions(self) -> None:
        self.window.actions["save_network"].setEnabled(self.network_to_save() is not None)

    # ---- saving --------------------------------------------------------------------------
    def network_to_save(self) -> tuple[Any, Any, str] | None:
        """(spec, module, what) of the network File > Save network writes, or None."""
        current = self.opener.current_network()
        if current is not None:
            spec, module = current
            return spec, module, os.path.basename(self.opener.loaded.info.path)
        return None

    @Slot()
    def _on_save_network_triggered(self) -> None:
        target = self.network_to_save()
        if target is None:
            return
        path = self.choose_save_path(target[2])
        if path:
            self.save_network(path)

    def save_network(self, path: str) -> bool:
        """Write the network as gradviz's model file; errors go to the error dialog."""
        from gradviz.core.networks import save_network

        target = self.network_to_save()
        if target is None:
            return False
        spec, module, _what = target
        try:
            save_network(path, spec, module)
        except GradvizError as exc:
            self.controller.show_error(str(exc), "")
            return False
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
