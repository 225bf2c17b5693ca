"""Connects the model features to the app: menu actions, drops, recent models, the model
panel (which the Jacobian explorer's page puts beside the explorer), and File > Save
network."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QSettings, Slot
from PySide6.QtWidgets import QFileDialog, QMainWindow

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio import ModelInfo
from gradviz.gui.common.settings import RecentFiles
from gradviz.gui.pages.models.open_model import RECENT_MODELS_KEY, ModelOpener
from gradviz.gui.run.session import RunSession

log = logging.getLogger(__name__)

SAVE_FILTER = "gradviz model files (*.safetensors)"


class ModelActions(QObject):
    """Owns the ModelOpener of the window and answers the File menu's model entries;
    Save network writes the lab session's coordinate network or the opened model.
    ``choose_save_path`` asks where to save (tests replace it). ``panel`` shows the opened
    model; ``attach(explorer)`` gives the explorer that runs it (an ``ExplorerTab``)."""

    def __init__(
        self,
        window: QMainWindow,
        settings: QSettings,
        session: RunSession,
        show_error: Callable[[str, str], Any],
    ) -> None:
        super().__init__(window)
        self.window = window
        self.session = session
        self.show_error = show_error
        self.explorer: Any = None
        self.opener = ModelOpener(window, settings, show_error, send_network=self._send_network)
        self.panel = self.opener.panel
        self.choose_save_path = self._choose_save_path
        self.saved_paths: list[str] = []  # files written by Save network, oldest first
        self._sent_label = ""
        self._pending_save: tuple[int, str] | None = None
        a = window.actions
        a["open_model"].triggered.connect(self.opener.choose_and_open)
        a["open_model_class"].triggered.connect(self.opener.choose_model_class)
        a["save_network"].triggered.connect(self._on_save_network_triggered)
        window.fileDropped.connect(self._on_file_dropped)
        window.recentModelChosen.connect(self._on_file_dropped)
        window.set_recent_models(RecentFiles(settings, RECENT_MODELS_KEY).read())
        self.opener.stateChanged.connect(self._on_opener_state_changed)
        self.opener.modelShown.connect(self._on_model_shown)
        self.opener.recentChanged.connect(window.set_recent_models)
        session.stateChanged.connect(self.update_actions)
        session.networkReady.connect(self._on_network_for_save)
        window.pages.bar.currentChanged.connect(self.update_actions)

    def attach(self, explorer: Any) -> None:
        """Models that can run are explored in ``explorer``."""
        self.explorer = explorer
        explorer.networkChanged.connect(self._on_explored_network_changed)

    # ---- opening -------------------------------------------------------------------------
    @Slot(str)
    def _on_file_dropped(self, path: str) -> None:
        if os.path.isdir(path):
            return  # a recording (a directory): the recordings open it
        self.opener.open_path(path)

    def _send_network(self, module, label, spec, in_dim, out_dim, in_shape=None) -> None:
        self._sent_label = label
        self.explorer.set_network(module, label, spec, in_dim, out_dim, in_shape=in_shape)

    @Slot(str)
    def _on_explored_network_changed(self, label: str) -> None:
        """The panel describes the opened file only while the explorer shows it."""
        if label != self._sent_label and self.opener.loaded is not None:
            self.opener.panel.show_not_explored(label)

    @Slot(object)
    def _on_model_shown(self, info: ModelInfo) -> None:
        """Bring the model panel forward once a model is on screen; a file that cannot run
        leaves the explorer as it was, and the panel says what the explorer shows."""
        if not info.runnable and self.explorer.network_label():
            panel = self.opener.panel
            # The reason is a sentence already: one full stop between the two ("..").
            panel.reason.setText(
                f"{panel.reason.text().rstrip('.')}. The explorer still shows "
                f"{self.explorer.network_label()}."
            )
        pages = self.window.pages
        index = pages.stack.indexOf(self.opener.panel.parentWidget())
        if index >= 0:
            pages.show_page(index + 1)  # the page where the panel sits (0 is the lab)

    @Slot(object)
    def _on_opener_state_changed(self, _state: object) -> None:
        self.update_actions()

    @Slot()
    def update_actions(self) -> None:
        self.window.actions["save_network"].setEnabled(self.save_source() is not None)
        if self._pending_save is not None and self._run_worker() is None:
            self._pending_save = None
            self.show_error(
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
        if opened:
            opened = self.explorer.network_label() == self._sent_label  # not a spec typed since
        on_lab = self.window.pages.current() == 0
        if run and (on_lab or not opened):
            return "run"
        return "file" if opened else None

    def _run_worker(self) -> Any:
        """The live fit worker when its run computes coordinates with a network."""
        worker = self.session.worker
        if worker is None or not worker.config.net:
            return None
        return worker

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
            self.session.request_network()
            return True
        current = self.opener.current_network()
        if source != "file" or current is None:
            return False
        return self._write(path, *current)

    @Slot(object)
    def _on_network_for_save(self, network: Any) -> None:
        """The run's network arrived (``NetworkCopy``): save it if Save network asked."""
        from gradviz.core.nets.networks import NetworkSpec, module_from_state

        pending, self._pending_save = self._pending_save, None
        if pending is None or pending[0] != network.generation:
            return
        spec = NetworkSpec.from_json(network.spec_json)
        try:
            module = module_from_state(spec, network.state)
        except Exception as exc:  # noqa: BLE001 - shown, never raised into Qt
            self.show_error(f"The network could not be copied: {exc}", "")
            return
        self._write(pending[1], spec, module)

    def _write(self, path: str, spec: Any, module: Any) -> bool:
        from gradviz.core.nets.networks import save_network

        try:
            save_network(path, spec, module)
        except GradvizError as exc:
            self.show_error(str(exc), "")
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
