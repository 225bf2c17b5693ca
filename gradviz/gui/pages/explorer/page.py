"""The Jacobian explorer's page: the explorer, with the opened model's panel beside it.

``models`` (the app's model files: ``panel``, ``attach(explorer)``) shows an opened model
in its panel and hands the explorer a model that can run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Qt, Slot
from PySide6.QtWidgets import QSplitter

from gradviz.gui.pages.explorer.explorer_tab import ExplorerTab

log = logging.getLogger(__name__)

#: The title of the dialog when the Jacobians could not be computed.
FAILED_TITLE = "gradviz: the Jacobians could not be computed"


class ExplorerPage(QObject):
    """``widget``: the page; ``explorer``: the ``ExplorerTab`` on it."""

    def __init__(self, models: Any, show_error: Callable[..., Any]) -> None:
        super().__init__()
        self.show_error = show_error
        self.explorer = ExplorerTab()
        self.widget = QSplitter(Qt.Orientation.Horizontal)
        self.widget.setObjectName("explorer-page")
        self.widget.addWidget(self.explorer)
        self.widget.addWidget(models.panel)
        # Never squeezed to a sliver at 1024 px (its table and its hints unreadable); the
        # splitter's handle still folds it away entirely.
        models.panel.setMinimumWidth(220)
        # A quarter of the page at any window size (at 1920 px a fixed 240 px cut its text).
        self.widget.setStretchFactor(0, 3)
        self.widget.setStretchFactor(1, 1)
        self.widget.setSizes([3000, 1000])
        models.attach(self.explorer)
        self.explorer.failed.connect(self._on_failed)

    @Slot(str, str)
    def _on_failed(self, sentence: str, details: str) -> None:
        log.error("explorer failed: %s\n%s", sentence, details)
        dialog = self.show_error(sentence, details)
        dialog.setWindowTitle(FAILED_TITLE)

    def hold_computations(self) -> Any:
        return self.explorer.hold_computations()

    def release_computations(self) -> None:
        self.explorer.release_computations()

    @property
    def thread_count(self) -> int:
        return int(self.explorer.worker_running())

    def shutdown(self, timeout_s: float = 30.0) -> None:  # noqa: ARG002 - the pages' call
        self.explorer.shutdown()
